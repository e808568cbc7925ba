-- A hold leaves 'pending' once: any update of a resolved hold is refused in the
-- database itself.
CREATE TRIGGER holds_resolve_once BEFORE UPDATE ON holds WHEN OLD.state <> 'pending'
BEGIN SELECT RAISE(ABORT, 'hold already resolved'); END;

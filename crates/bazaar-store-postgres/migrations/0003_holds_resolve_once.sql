-- A hold leaves 'pending' once: any update of a resolved hold is refused in the
-- database itself, so a batch that tried it aborts whole.
CREATE FUNCTION bazaar_hold_resolves_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.state <> 'pending' THEN
    RAISE EXCEPTION 'hold % is already %', OLD.id, OLD.state USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER holds_resolve_once BEFORE UPDATE ON holds FOR EACH ROW EXECUTE FUNCTION bazaar_hold_resolves_once();

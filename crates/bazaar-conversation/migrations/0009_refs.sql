-- Record references a message carries (JSON), when it carries any.
ALTER TABLE messages ADD COLUMN refs TEXT;

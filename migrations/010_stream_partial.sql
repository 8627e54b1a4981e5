-- Streams: what a cut stream delivered. partial_text is the text a stream
-- carried before it was cut (NULL: the call was not a cut stream, or
-- nothing arrived); its tokens are the attempt's input_tokens and
-- output_tokens. A result whose attempt has partial_text is a partial answer
-- accepted by accept_partial_min_chars. Owned by ledger.
ALTER TABLE triage_attempt ADD COLUMN partial_text text;

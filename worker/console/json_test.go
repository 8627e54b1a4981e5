package console_test

import "encoding/json"

func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

package keys

// invalidKeyReasons are the classifier's reasons (class exhausted) that say
// the API key itself is refused: wrong, revoked or not authorised. No top-up
// and no wait makes such a key work; only a person fixing the key does.
var invalidKeyReasons = map[string]bool{
	"invalid_api_key": true, // OpenAI, xAI, OpenAI-compatible
	"api_key_invalid": true, // Gemini
	"unauthorized":    true, // a bare 401
	"gateway_auth":    true, // a gateway refusing the key
}

// InvalidKey reports whether an exhausted verdict's reason says the key is
// invalid (an authentication failure) rather than out of money or quota.
// The class stays exhausted (the breaker holds the key, one probe at a
// time); only what a person is told changes.
func InvalidKey(reason string) bool { return invalidKeyReasons[reason] }

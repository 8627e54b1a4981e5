package classify

import "testing"

// Every known:false verdict's reason is an UnknownReason, and no known one is.
func TestUnknownReasonMatchesKnownFalse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		o     Observation
		known bool
	}{
		{Observation{Vendor: "openai", Phase: "response", Status: 418, Body: "{}"}, false},
		{Observation{Vendor: "openai", Phase: "response", Status: 501, Body: "{}"}, false},
		{Observation{Vendor: "openai", Phase: "response", Status: 0}, false},
		{Observation{Vendor: "openai", Phase: "bogus"}, false},
		{Observation{Vendor: "openai", Phase: "response", Status: 429, Headers: map[string]string{"retry-after": "2"}, Body: "{}"}, true},
		{Observation{Vendor: "openai", Phase: "not_sent"}, true},
	} {
		v := Classify(c.o)
		if v.Known != c.known {
			t.Fatalf("%+v: known %v, want %v (test case out of date)", c.o, v.Known, c.known)
		}
		if got := UnknownReason(v.Reason); got != !v.Known {
			t.Errorf("UnknownReason(%q) = %v, verdict known %v", v.Reason, got, v.Known)
		}
	}
	if !UnknownReason("gateway_429_unexplained") {
		t.Error("the gateway fallback row is unknown")
	}
}

package classify

import (
	"net/http"
	"testing"
)

// parseHTTPTime reads what net/http's ParseTime reads, and refuses what it
// refuses.
func TestParseHTTPTimeIsNetHTTPs(t *testing.T) {
	for _, s := range []string{
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Wed, 21 Oct 2015 07:28:00 GMT", "", "120", "Sun, 06 Nov 1994 08:49:37 UTC", "not a date",
	} {
		want, wantErr := http.ParseTime(s)
		got, err := parseHTTPTime(s)
		if (err != nil) != (wantErr != nil) || !got.Equal(want) {
			t.Errorf("parseHTTPTime(%q) = %v, %v; net/http: %v, %v", s, got, err, want, wantErr)
		}
	}
}

package listenaddr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by Parse's errors.
var ErrInvalid = errors.New("not a listen address")

// Addr is a checked listen address.
type Addr struct {
	// Host is as given: "" (every interface), a name or an IP.
	Host string
	// Port is the port number; 0 picks a free one.
	Port int
	// Loopback is true when only this machine can connect: localhost or a
	// loopback IP. An empty host, another IP or another name is false.
	Loopback bool
}

// String is the address in host:port form.
func (a Addr) String() string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

// Parse checks s as host:port (":9090", "127.0.0.1:9090", "[::1]:9090",
// "localhost:9090"). It resolves nothing.
func Parse(s string) (Addr, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Addr{}, fmt.Errorf("%q: %w: want HOST:PORT, e.g. 127.0.0.1:9090", s, ErrInvalid)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return Addr{}, fmt.Errorf("%q: %w: port %q is not a number from 0 to 65535", s, ErrInvalid, port)
	}
	a := Addr{Host: host, Port: p}
	switch ip := net.ParseIP(host); {
	case host == "":
	case ip != nil:
		a.Loopback = ip.IsLoopback()
	case strings.EqualFold(host, "localhost"):
		a.Loopback = true
	case !validName(host):
		return Addr{}, fmt.Errorf("%q: %w: %q is neither an IP address nor a host name", s, ErrInvalid, host)
	}
	return a, nil
}

// validName is the host name syntax of RFC 1123: labels of letters, digits
// and hyphens, not starting or ending with a hyphen.
func validName(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Listen parses s (Parse), warns on log when it reaches beyond loopback,
// and listens on it. what names the server in the warning ("metrics").
func Listen(ctx context.Context, s, what string, log *slog.Logger) (net.Listener, Addr, error) {
	a, err := Parse(s)
	if err != nil {
		return nil, Addr{}, err
	}
	if !a.Loopback && log != nil {
		where := "every interface"
		if a.Host != "" {
			where = a.Host
		}
		log.WarnContext(ctx, what+" listen beyond loopback: anyone who can reach this address can read them",
			"addr", a.String(), "on", where)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", a.String())
	if err != nil {
		return nil, Addr{}, fmt.Errorf("listen on %s: %w", a, err)
	}
	return ln, a, nil
}

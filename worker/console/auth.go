package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// AddrDefault is where `triage ui` listens unless told otherwise: loopback,
// reachable from other machines only through an SSH tunnel.
const AddrDefault = "127.0.0.1:8080"

// EnvToken is the environment variable read when --ui-token is not given.
const EnvToken = "TRIAGE_UI_TOKEN"

// ErrTokenRequired is CheckAddr's answer for a non-loopback address without
// a token.
var ErrTokenRequired = errors.New("a non-loopback address needs a token (--ui-token or " + EnvToken +
	"): anyone who can reach it could requeue dead letters and resume keys; " +
	"or keep the loopback default and reach it through an SSH tunnel (ssh -L 8080:127.0.0.1:8080 host)")

// CheckAddr validates a listen address: host:port, and a token when the
// host is not loopback (an empty host, ":8080", listens on every interface).
func CheckAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want host:port, e.g. %s: %w", addr, AddrDefault, err)
	}
	if token == "" && !IsLoopback(host) {
		return fmt.Errorf("address %q: %w", addr, ErrTokenRequired)
	}
	return nil
}

// IsLoopback reports whether host names only this machine: "localhost" or a
// loopback IP. Any other name may resolve elsewhere, so it is not.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Listen checks addr with CheckAddr and listens on it.
func Listen(addr, token string) (net.Listener, error) {
	if err := CheckAddr(addr, token); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves h on ln until ctx ends, then shuts down, letting requests in
// progress finish for a few seconds.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// authenticate requires token on every request when it is set: as
// "Authorization: Bearer TOKEN" (scripts) or as the basic-auth password, any
// user name (browsers prompt for it). Compared in constant time.
func authenticate(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got string
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = strings.TrimSpace(b)
		} else if _, p, ok := r.BasicAuth(); ok {
			got = p
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="triage", charset="UTF-8"`)
			http.Error(w, "401 unauthorized: this triage console needs its token (bearer, or basic-auth password)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

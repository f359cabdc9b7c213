package ops

import "net/http"

// Authed wraps h (a status page, say) with the surface's guard: a
// caller off loopback presents the admin token as for /v1/status.
func (s *Surface) Authed(h http.Handler) http.Handler {
	return s.authed(func(w http.ResponseWriter, r *http.Request, _ Caller) { h.ServeHTTP(w, r) })
}

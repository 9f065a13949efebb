// Package hostguard keeps an HTTP server that listens on a loopback address from
// answering requests made for another host name. A web page on any site can have a
// browser send requests to 127.0.0.1 through a name of its own that resolves there
// (DNS rebinding), and read the answers as its own; such requests name the page's
// host in their Host header, which a server on loopback checks.
package hostguard

import (
	"net"
	"net/http"
	"slices"
	"strings"
)

// Loopback reports whether host (a Host header: a name or an address, with or
// without a port) names this machine's loopback: localhost, a name under
// .localhost, or a loopback address.
func Loopback(host string) bool {
	h := name(host)
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// name is host without its port and brackets, lower-cased, without a final dot.
func name(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(host, "]"), "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// Wrap answers requests whose Host is neither loopback nor one of allow (names,
// any port) with 421 Misdirected Request, saying what the server is (such as "the
// console") and which flag allows another name; it hands the others to next.
func Wrap(next http.Handler, what, flag string, allow []string) http.Handler {
	allowed := make([]string, 0, len(allow))
	for _, a := range allow {
		allowed = append(allowed, name(a))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "" && !Loopback(r.Host) && !slices.Contains(allowed, name(r.Host)) {
			http.Error(w, what+" on a loopback address answers requests for localhost, 127.0.0.1 or [::1] only, not for "+r.Host+
				": a web page elsewhere could otherwise reach it through a name of its own (DNS rebinding); allow a name of yours, such as a reverse proxy's, with "+
				flag+" NAME", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

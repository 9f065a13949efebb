package hostguard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/hostguard"
)

func TestWrap(t *testing.T) {
	t.Parallel()
	h := hostguard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }), "the console", "--ui-allow-host", []string{"Console.Example.com"})
	for host, want := range map[string]int{
		"127.0.0.1:8090":           200,
		"127.0.0.2":                200,
		"localhost:8090":           200,
		"LOCALHOST.":               200,
		"app.localhost:8090":       200,
		"[::1]:8090":               200,
		"console.example.com":      200,
		"console.example.com:443":  200,
		"rebind.evil.example:8090": 421,
		"10.0.0.5:8090":            421,
		"localhost.evil.example":   421,
		"127.0.0.1.nip.io":         421,
		"[::ffff:10.0.0.1]:8090":   421,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
		if want == 421 && (!strings.Contains(w.Body.String(), "not for "+host) || !strings.Contains(w.Body.String(), "--ui-allow-host NAME")) {
			t.Errorf("Host %q: %q", host, w.Body.String())
		}
	}
}

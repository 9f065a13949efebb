package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// A sign-in token shorter than 16 characters is refused when the console is made.
func TestAShortTokenIsRefused(t *testing.T) {
	t.Parallel()
	b := natstest.Start(t).Bus(t, bus.Config{})
	for _, tok := range []string{"x", "s3cret", strings.Repeat("x", MinTokenLength-1)} {
		_, err := New(Config{Bus: b, Token: tok})
		if err == nil || !strings.Contains(err.Error(), "--ui-token") || !strings.Contains(err.Error(), "at least 16") {
			t.Errorf("token of %d characters: %v, want an error naming --ui-token and saying at least 16", len(tok), err)
		}
	}
	if _, err := New(Config{Bus: b, Token: strings.Repeat("x", MinTokenLength)}); err != nil {
		t.Errorf("a token of 16 characters: %v", err)
	}
}

// Wrong tokens are throttled per client and across clients; over either limit, even
// the right token is refused with 429 and Retry-After until the allowance is back.
func TestSignInIsThrottled(t *testing.T) {
	t.Parallel()
	const tok = "the-right-token-0123"
	b := natstest.Start(t).Bus(t, bus.Config{})
	console := func() (*Console, *time.Time) {
		c, err := New(Config{Bus: b, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1_800_000_000, 0)
		c.signIns.now = func() time.Time { return now }
		return c, &now
	}
	signIn := func(c *Console, from, token string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"name": {"ada"}, "token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = from + ":40000"
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, req)
		return rec.Code, rec.Header().Get("Retry-After")
	}

	t.Run("one client guessing", func(t *testing.T) {
		c, now := console()
		compared := 0
		for range 200 {
			switch code, _ := signIn(c, "192.0.2.1", "guess"); code {
			case http.StatusUnauthorized:
				compared++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("a wrong token: %d", code)
			}
		}
		if compared != SignInBurst {
			t.Errorf("200 guesses at once: %d compared, want %d", compared, SignInBurst)
		}
		if code, retry := signIn(c, "192.0.2.1", tok); code != http.StatusTooManyRequests || retry != "12" {
			t.Errorf("the right token from the guessing client: %d Retry-After %q, want 429 and 12", code, retry)
		}
		if code, _ := signIn(c, "192.0.2.2", tok); code != http.StatusSeeOther {
			t.Errorf("the right token from another client: %d, want 303", code)
		}
		*now = now.Add(SignInEvery)
		if code, _ := signIn(c, "192.0.2.1", tok); code != http.StatusSeeOther {
			t.Errorf("the right token %v later: %d, want 303", SignInEvery, code)
		}
		if code, _ := signIn(c, "192.0.2.1", "guess"); code != http.StatusUnauthorized {
			t.Errorf("a wrong token after the wait: %d, want 401", code)
		}
		if code, _ := signIn(c, "192.0.2.1", "guess"); code != http.StatusTooManyRequests {
			t.Errorf("a second wrong token after the wait: %d, want 429", code)
		}
	})
	t.Run("many clients guessing", func(t *testing.T) {
		c, now := console()
		compared := 0
		for i := range 200 {
			if code, _ := signIn(c, "198.51.100."+string(rune('0'+i%10))+string(rune('0'+i/10%10)), "guess"); code == http.StatusUnauthorized {
				compared++
			}
		}
		if compared != SignInGlobalBurst {
			t.Errorf("200 guesses from 100 clients: %d compared, want %d", compared, SignInGlobalBurst)
		}
		if code, retry := signIn(c, "203.0.113.9", tok); code != http.StatusTooManyRequests || retry != "3" {
			t.Errorf("the right token from a new client: %d Retry-After %q, want 429 and 3", code, retry)
		}
		*now = now.Add(SignInGlobalEvery)
		if code, _ := signIn(c, "203.0.113.9", tok); code != http.StatusSeeOther {
			t.Errorf("the right token %v later: %d, want 303", SignInGlobalEvery, code)
		}
	})
}

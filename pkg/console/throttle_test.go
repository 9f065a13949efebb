package console

import (
	"fmt"
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
		addr := func(i int) string { return fmt.Sprintf("198.51.100.%d", i%100) }
		compared := 0
		for i := range 200 {
			if code, _ := signIn(c, addr(i), "guess"); code == http.StatusUnauthorized {
				compared++
			}
		}
		// Each of the 100 addresses had its first guess; after that the global limit
		// held every second one.
		if compared != 100 {
			t.Errorf("200 guesses from 100 clients: %d compared, want 100 (one each)", compared)
		}
		if code, retry := signIn(c, addr(7), tok); code != http.StatusTooManyRequests || retry != "3" {
			t.Errorf("the right token from a guessing client: %d Retry-After %q, want 429 and 3", code, retry)
		}
		*now = now.Add(SignInGlobalEvery)
		if code, _ := signIn(c, addr(7), tok); code != http.StatusSeeOther {
			t.Errorf("the right token %v later: %d, want 303", SignInGlobalEvery, code)
		}
	})
	t.Run("a guesser cannot lock others out", func(t *testing.T) {
		c, now := console()
		// One guess every SignInGlobalEvery from ever-new addresses keeps the global
		// allowance empty...
		for i := range SignInGlobalBurst + 10 {
			signIn(c, fmt.Sprintf("198.51.100.%d", i), "guess")
		}
		if code, _ := signIn(c, "198.51.100.0", "guess"); code != http.StatusTooManyRequests {
			t.Fatalf("a second guess from a guessing client: %d, want 429", code)
		}
		// ...but someone who has not failed lately still signs in at once.
		if code, _ := signIn(c, "203.0.113.9", tok); code != http.StatusSeeOther {
			t.Errorf("the right token from a client that never failed: %d, want 303", code)
		}
		// And one wrong token does not lock them out for long: their own allowance
		// is full again after SignInEvery.
		if code, _ := signIn(c, "203.0.113.10", "typo"); code != http.StatusUnauthorized {
			t.Fatalf("a typo: %d, want 401", code)
		}
		*now = now.Add(SignInEvery)
		for i := range 10 {
			signIn(c, fmt.Sprintf("198.51.101.%d", i), "guess")
		}
		if code, _ := signIn(c, "203.0.113.10", tok); code != http.StatusSeeOther {
			t.Errorf("the right token %v after a typo: %d, want 303", SignInEvery, code)
		}
	})
	t.Run("attempts in flight count", func(t *testing.T) {
		// An attempt counts as soon as it is allowed, before its token is compared:
		// attempts arriving together cannot all pass the check before any is counted.
		c, _ := console()
		allowed := 0
		for range 50 {
			if ok, _ := c.signIns.take("192.0.2.50"); ok {
				allowed++
			}
		}
		if allowed != SignInBurst {
			t.Errorf("50 attempts in flight: %d allowed, want %d", allowed, SignInBurst)
		}
		c.signIns.succeeded("192.0.2.50")
		if ok, _ := c.signIns.take("192.0.2.50"); !ok {
			t.Errorf("an attempt after one succeeded: refused, want allowed (a right token gives its count back)")
		}
	})
}

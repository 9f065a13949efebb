package console

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in is throttled so the token cannot be guessed: wrong tokens are counted per
// client address and across all clients, each a token bucket. A client may send
// SignInBurst wrong tokens back to back, then one more every SignInEvery (5 a
// minute); all clients together SignInGlobalBurst, then one every SignInGlobalEvery
// (20 a minute). An attempt over either limit is refused with 429 and Retry-After
// before the token is compared, the right token included. Sessions already signed in
// are not affected.
//
// The global limit never refuses a client that has not failed lately (its own
// allowance is full): otherwise one guesser sending a wrong token every few seconds
// would keep everyone else from signing in. Guessers spread over many addresses
// therefore get one guess per address before the global limit holds them; with
// tokens of at least MinTokenLength characters that is no threat, while the lock-out
// would be.
//
// An attempt takes its tokens before the comparison and gives them back when the
// token was right, so concurrent attempts cannot all pass the check before any
// counts.
const (
	SignInBurst       = 5
	SignInEvery       = 12 * time.Second
	SignInGlobalBurst = 20
	SignInGlobalEvery = 3 * time.Second
	// signInMaxClients bounds the addresses remembered; past it, the ones back to a
	// full allowance are forgotten, and a new address counts only globally.
	signInMaxClients = 10_000
	// MinTokenLength is the shortest sign-in token the console accepts.
	MinTokenLength = 16
)

// allowance is a token bucket: tokens refill at one per every, up to burst.
type allowance struct {
	tokens float64
	last   time.Time
}

func (a *allowance) refill(now time.Time, burst int, every time.Duration) {
	if a.last.IsZero() {
		a.tokens, a.last = float64(burst), now
		return
	}
	a.tokens = min(float64(burst), a.tokens+float64(now.Sub(a.last))/float64(every))
	a.last = now
}

// wait is how long until one token is back.
func (a *allowance) wait(every time.Duration) time.Duration {
	return time.Duration((1 - a.tokens) * float64(every))
}

type throttle struct {
	mu      sync.Mutex
	now     func() time.Time
	clients map[string]*allowance
	global  allowance
}

func newThrottle() *throttle {
	return &throttle{now: time.Now, clients: map[string]*allowance{}}
}

// clientOf is the address a request is counted under: its peer's IP. Behind a
// reverse proxy that is the proxy's, so every client shares one allowance.
func clientOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// client returns the client's allowance, refilled; nil when too many are tracked.
func (t *throttle) client(addr string, now time.Time) *allowance {
	a := t.clients[addr]
	if a == nil {
		if len(t.clients) >= signInMaxClients {
			for k, v := range t.clients {
				if v.refill(now, SignInBurst, SignInEvery); v.tokens >= SignInBurst {
					delete(t.clients, k)
				}
			}
			if len(t.clients) >= signInMaxClients {
				return nil
			}
		}
		a = &allowance{}
		t.clients[addr] = a
	}
	a.refill(now, SignInBurst, SignInEvery)
	return a
}

// take reports whether a sign-in from addr may be tried now, and if not, how long
// until it may. An attempt it allows is counted as wrong until succeeded says
// otherwise.
func (t *throttle) take(addr string) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, wait := t.check(addr)
	if wait > 0 {
		return false, wait
	}
	// A fresh client past the global limit does not push it further into debt: the
	// clients that keep failing wait at most SignInGlobalEvery for it.
	t.global.tokens = max(t.global.tokens-1, 0)
	if a != nil {
		a.tokens--
	}
	return true, 0
}

// refused reports how long until a sign-in from addr may be tried, 0 if it may be
// now, without counting one: the console asks it before reading a sign-in's form.
func (t *throttle) refused(addr string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, wait := t.check(addr)
	return wait
}

// check refills the allowances and returns addr's (nil when too many addresses are
// tracked) and how long until an attempt from it may be tried. t.mu is held.
func (t *throttle) check(addr string) (*allowance, time.Duration) {
	now := t.now()
	t.global.refill(now, SignInGlobalBurst, SignInGlobalEvery)
	a := t.client(addr, now)
	fresh := a != nil && a.tokens >= SignInBurst
	var wait time.Duration
	if a != nil && a.tokens < 1 {
		wait = a.wait(SignInEvery)
	}
	if !fresh && t.global.tokens < 1 {
		wait = max(wait, t.global.wait(SignInGlobalEvery))
	}
	return a, wait
}

// succeeded gives back what take counted for an attempt whose token was right.
func (t *throttle) succeeded(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.global.tokens = min(t.global.tokens+1, SignInGlobalBurst)
	if a := t.clients[addr]; a != nil {
		a.tokens = min(a.tokens+1, SignInBurst)
	}
}

package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The console is read-only unless it was given a token. A person signs in with the
// token and their name; the session cookie they get is HttpOnly and SameSite=Strict,
// and every action must also carry the session's CSRF token (a hidden form field)
// and come from the console's own origin (net/http's CrossOriginProtection checks
// Sec-Fetch-Site and Origin). The name is recorded with every answer.

const (
	cookieName = "skillbus_console"
	sessionTTL = 12 * time.Hour
)

type session struct {
	Who     string
	CSRF    string
	expires time.Time
}

type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func newSessions() *sessions { return &sessions{m: map[string]*session{}} }

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) create(who string) (string, *session) {
	id := randomToken()
	ss := &session{Who: who, CSRF: randomToken(), expires: time.Now().Add(sessionTTL)}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, v := range s.m {
		if now.After(v.expires) {
			delete(s.m, k)
		}
	}
	s.m[id] = ss
	return id, ss
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[id]
	if ss == nil || time.Now().After(ss.expires) {
		delete(s.m, id)
		return nil
	}
	return ss
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// session returns the request's session, or nil.
func (c *Console) session(r *http.Request) *session {
	if c.cfg.Token == "" {
		return nil
	}
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	return c.sessions.get(ck.Value)
}

// action wraps a handler that changes something: it needs a token configured, a
// signed-in session and the session's CSRF token.
func (c *Console) action(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.Token == "" {
			http.Error(w, "the console is read-only: start it with --ui-token to allow actions", http.StatusForbidden)
			return
		}
		s := c.session(r)
		if s == nil {
			http.Error(w, "sign in first (/login) with the console's token", http.StatusUnauthorized)
			return
		}
		if !readForm(w, r) {
			return
		}
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostFormValue("csrf")
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) != 1 {
			http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
			return
		}
		h(w, r, s)
	})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "login", "Sign in", loginView{Next: localPath(r.URL.Query().Get("next"))})
}

type loginView struct {
	Next, Error, Name string
}

// maxFormBytes bounds every request body the console reads: its forms carry a CSRF
// token, a name, a sign-in token and a reason of at most 500 characters, far below.
const maxFormBytes = 64 << 10

// readForm parses a POST's form, reading at most maxFormBytes of the body. A body
// over that is answered 413, a multipart body (no console form sends one, and
// net/http would spool its files to disk) 415; readForm then reports false and the
// caller answers nothing more.
func readForm(w http.ResponseWriter, r *http.Request) bool {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); strings.HasPrefix(mt, "multipart/") {
		http.Error(w, "the console's forms are sent as application/x-www-form-urlencoded, not "+mt, http.StatusUnsupportedMediaType)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, fmt.Sprintf("the form is larger than the console accepts (%d KiB)", maxFormBytes>>10), http.StatusRequestEntityTooLarge)
		} else {
			http.Error(w, "the form could not be read: "+err.Error(), http.StatusBadRequest)
		}
		return false
	}
	return true
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	// Refusals that need nothing from the form come before it is read: a client over
	// the sign-in limit gets its 429 without the console reading a byte of its body.
	if c.cfg.Token == "" {
		c.renderCode(w, r, http.StatusUnauthorized, "login", "Sign in", loginView{Next: "/", Error: "This console is read-only: it was started without --ui-token."})
		return
	}
	client := clientOf(r)
	if wait := c.signIns.refused(client); wait > 0 {
		c.tooManySignIns(w, r, loginView{Next: "/"}, wait)
		return
	}
	if !readForm(w, r) {
		return
	}
	v := loginView{Next: localPath(r.PostFormValue("next")), Name: strings.TrimSpace(r.PostFormValue("name"))}
	switch {
	case v.Name == "":
		v.Error = "Say who you are: your name is recorded with every answer you give."
	case len(v.Name) > 100:
		v.Error = "The name is longer than 100 characters."
	}
	if v.Error == "" {
		if ok, wait := c.signIns.take(client); !ok {
			c.tooManySignIns(w, r, v, wait)
			return
		} else if subtle.ConstantTimeCompare([]byte(r.PostFormValue("token")), []byte(c.cfg.Token)) != 1 {
			v.Error = "Wrong token."
			c.cfg.Log.Warn("console: sign-in with a wrong token", "name", v.Name, "remote", r.RemoteAddr)
		} else {
			c.signIns.succeeded(client)
		}
	}
	if v.Error != "" {
		c.renderCode(w, r, http.StatusUnauthorized, "login", "Sign in", v)
		return
	}
	id, _ := c.sessions.create(v.Name)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(sessionTTL / time.Second)})
	c.cfg.Log.Info("console: signed in", "who", v.Name, "remote", r.RemoteAddr)
	http.Redirect(w, r, v.Next, http.StatusSeeOther)
}

// tooManySignIns answers a sign-in over the throttle's limits: 429 and Retry-After.
func (c *Console) tooManySignIns(w http.ResponseWriter, r *http.Request, v loginView, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	v.Error = fmt.Sprintf("Too many wrong tokens: try again in %d s.", secs)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	c.cfg.Log.Warn("console: sign-in refused: too many wrong tokens", "name", v.Name, "remote", r.RemoteAddr, "retry_after", secs)
	c.renderCode(w, r, http.StatusTooManyRequests, "login", "Sign in", v)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sessions.drop(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// localPath keeps a redirect target on this site: a path, not a URL elsewhere.
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || p == "" || u.IsAbs() || u.Host != "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.Contains(p, "\\") {
		return "/"
	}
	return p
}

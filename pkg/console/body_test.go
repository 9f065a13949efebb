package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// hugeBody is a request body of n bytes after head, generated as it is read; read
// counts what the handler took of it.
type hugeBody struct {
	head io.Reader
	left int64
	read int64
}

func newHugeBody(head string, n int64) *hugeBody {
	return &hugeBody{head: strings.NewReader(head), left: n}
}

func (b *hugeBody) Read(p []byte) (int, error) {
	n, err := b.head.Read(p)
	if err == io.EOF {
		if b.left == 0 {
			return 0, io.EOF
		}
		n = int(min(int64(len(p)), b.left))
		for i := range n {
			p[i] = 'a'
		}
		b.left -= int64(n)
		err = nil
	}
	b.read += int64(n)
	return n, err
}

const hugeSize = 300 << 20

// Every body the console reads is bounded: a sign-in form of 300 MB is answered 413
// after the console read 64 KiB of it, a multipart one 415 before it read any (net/http
// would spool its file to a temporary file), and a client over the sign-in limit gets
// its 429 before a byte of its body is read. Actions are bounded the same way.
func TestTheConsoleReadsAtMost64KiBOfABody(t *testing.T) {
	const tok = "the-right-token-0123"
	b := natstest.Start(t).Bus(t, bus.Config{})
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where multipart spools files
	c, err := New(Config{Bus: b, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	post := func(path, ct string, body io.Reader, from string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, path, body)
		req.Header.Set("Content-Type", ct)
		req.RemoteAddr = from + ":40000"
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	const form = "application/x-www-form-urlencoded"
	const slack = 4 << 10 // what a read may take past the limit

	big := newHugeBody("name=eve&token=wrong&f=", hugeSize)
	if rec := post("/login", form, big, "192.0.2.1"); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 300 MB sign-in form: %d %s, want 413", rec.Code, rec.Body)
	}
	if big.read > maxFormBytes+slack {
		t.Errorf("a 300 MB sign-in form: the console read %d bytes of it, want at most %d", big.read, maxFormBytes+slack)
	}

	multi := newHugeBody("--X\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\neve\r\n--X\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big\"\r\n\r\n", hugeSize)
	if rec := post("/login", "multipart/form-data; boundary=X", multi, "192.0.2.1"); rec.Code != http.StatusUnsupportedMediaType {
		t.Errorf("a multipart sign-in with a 300 MB file: %d %s, want 415", rec.Code, rec.Body)
	}
	if multi.read != 0 {
		t.Errorf("a multipart sign-in: the console read %d bytes of it, want none", multi.read)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("temporary files after the sign-ins: %v", left)
	}

	// A small form under the limit still signs in.
	rec := post("/login", form, strings.NewReader(url.Values{"name": {"ada"}, "token": {tok}}.Encode()), "192.0.2.2")
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("a sign-in with the right token: %d %s", rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()

	// An action's body is bounded too, once the session is known.
	act := newHugeBody("csrf=x&reason=", hugeSize)
	if rec := post("/dlq/nosuch/replay", form, act, "192.0.2.2", cookies...); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 300 MB action form: %d %s, want 413", rec.Code, rec.Body)
	}
	if act.read > maxFormBytes+slack {
		t.Errorf("a 300 MB action form: the console read %d bytes of it, want at most %d", act.read, maxFormBytes+slack)
	}
	anon := newHugeBody("csrf=x&reason=", hugeSize)
	if rec := post("/dlq/nosuch/replay", form, anon, "192.0.2.3"); rec.Code != http.StatusUnauthorized || anon.read != 0 {
		t.Errorf("an action without a session: %d, %d bytes read, want 401 and none", rec.Code, anon.read)
	}

	// Over the sign-in limit, the 429 comes before the body is read.
	for range SignInBurst {
		if rec := post("/login", form, strings.NewReader("name=eve&token=wrong"), "192.0.2.4"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("a wrong token: %d", rec.Code)
		}
	}
	over := newHugeBody("name=eve&token=wrong&f=", hugeSize)
	if rec := post("/login", form, over, "192.0.2.4"); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a sign-in over the limit: %d Retry-After %q, want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if over.read != 0 {
		t.Errorf("a sign-in over the limit: the console read %d bytes of its body, want none", over.read)
	}
}

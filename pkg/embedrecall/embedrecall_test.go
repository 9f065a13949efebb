package embedrecall_test

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillbus/skillbus/pkg/embedrecall"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// server is a local /v1/embeddings endpoint. Its model maps words to concepts, so
// synonyms land on one axis ("bill" and "invoice"), as a real embedding model would.
type server struct {
	*httptest.Server
	mu     sync.Mutex
	inputs int
	mode   string // "", "fail", "malformed", "slow"
}

var concepts = map[string]string{"bill": "invoice", "invoice": "invoice", "charge": "invoice", "customer": "client", "client": "client",
	"photo": "image", "picture": "image", "image": "image", "shrink": "resize", "resize": "resize", "smaller": "resize"}

func vector(text string) []float32 {
	v := make([]float32, 32)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		w = strings.Trim(w, ".,:;!?")
		if c, ok := concepts[w]; ok {
			w = c
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%32]++
	}
	return v
}

func newServer(t *testing.T) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.inputs += len(req.Input)
		mode := s.mode
		s.mu.Unlock()
		switch mode {
		case "fail":
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
			return
		case "malformed":
			_, _ = w.Write([]byte(`{"data":[{"index":0,"embedding":[]}]}`))
			return
		case "slow":
			<-r.Context().Done()
			return
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		resp := struct {
			Object string `json:"object"`
			Data   []item `json:"data"`
			Model  string `json:"model"`
		}{Object: "list", Model: req.Model}
		for i, in := range req.Input {
			resp.Data = append(resp.Data, item{"embedding", i, vector(in)})
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) set(mode string) { s.mu.Lock(); s.mode = mode; s.mu.Unlock() }
func (s *server) count() int      { s.mu.Lock(); defer s.mu.Unlock(); return s.inputs }

var catalog = []*skill.Skill{
	{Name: "invoice-generator", Description: "Generate an invoice for a client.", Digest: "i1"},
	{Name: "image-resizer", Description: "Resize an image.", Digest: "r1"},
	{Name: "weather", Description: "Weather forecast for a city.", Digest: "w1"},
}

func TestRecallFindsSynonymsAndCachesByDigest(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	r, err := embedrecall.New(embedrecall.Config{URL: srv.URL + "/v1", Model: "m", Client: srv.Client(), K: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n, err := r.Warm(ctx, catalog); n != 3 || err != nil {
		t.Fatalf("warm: %d, %v", n, err)
	}
	got, err := r.Recall(ctx, "bill the customer", catalog)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].Name != "invoice-generator" || got[0].Source != selector.SourceSemantic || got[0].Similarity <= 0 {
		t.Fatalf("recall = %+v", got)
	}
	// One skill changes: only it is embedded again.
	changed := *catalog[1]
	changed.Digest, changed.Description = "r2", "Resize or crop a photo."
	before := srv.count()
	if n, err := r.Warm(ctx, []*skill.Skill{catalog[0], &changed, catalog[2]}); n != 1 || err != nil {
		t.Fatalf("re-warm embedded %d, %v", n, err)
	}
	if srv.count() != before+1 || r.Cached() != 3 {
		t.Fatalf("inputs %d -> %d, cached %d", before, srv.count(), r.Cached())
	}
}

func TestFailingSlowAndMalformedAnswers(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	r, _ := embedrecall.New(embedrecall.Config{URL: srv.URL + "/v1/embeddings", Model: "m", Client: srv.Client()})
	ctx := context.Background()
	srv.set("fail")
	if _, err := r.Recall(ctx, "x", nil); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("failing: %v", err)
	}
	srv.set("malformed")
	if _, err := r.Recall(ctx, "x", nil); !errors.Is(err, embedrecall.ErrMalformed) {
		t.Fatalf("malformed: %v", err)
	}
	srv.set("slow")
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := r.Recall(tctx, "x", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow: %v", err)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	vs, err := embedrecall.Parse([]byte(`{"data":[{"index":1,"embedding":[1,2]},{"index":0,"embedding":[3,4]}]}`), 2)
	if err != nil || vs[0][0] != 3 || vs[1][0] != 1 {
		t.Fatalf("%v %v", vs, err)
	}
	for _, bad := range []string{`{}`, `{"data":[]}`, `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]}`,
		`{"data":[{"index":0,"embedding":[1]},{"index":1,"embedding":[1,2]}]}`, `nope`} {
		if _, err := embedrecall.Parse([]byte(bad), 2); !errors.Is(err, embedrecall.ErrMalformed) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":0,"embedding":[1,2]}]}`), 1)
	f.Fuzz(func(t *testing.T, body []byte, n int) {
		if n < 0 || n > 16 {
			return
		}
		vs, err := embedrecall.Parse(body, n)
		if err != nil {
			return
		}
		if len(vs) != n {
			t.Fatalf("%d vectors for %d", len(vs), n)
		}
		for _, v := range vs {
			if len(v) == 0 || len(v) != len(vs[0]) {
				t.Fatalf("bad vector %v", v)
			}
		}
	})
}

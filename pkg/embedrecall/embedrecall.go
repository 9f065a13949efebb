// Package embedrecall is the optional semantic recall source: it embeds each skill (name,
// description, tags, examples) and each request with an OpenAI-compatible
// /v1/embeddings endpoint and recalls the skills nearest by cosine similarity. Skill
// vectors are cached by skill digest, so a catalog reload embeds only what changed;
// skills not embedded yet are embedded in the background and simply not recalled
// until they are.
package embedrecall

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Config configures a Recaller. Zero values are the documented defaults.
type Config struct {
	// URL is the API's base URL (http://localhost:11434/v1, https://api.openai.com/v1);
	// requests go to URL/embeddings, or to URL when it ends in /embeddings. Required.
	URL string
	// Model names the embedding model; required.
	Model string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Client sends the requests; nil means a client of its own.
	Client *http.Client
	// Batch bounds the texts of one request; 0 means 64.
	Batch int
	// K is how many nearest skills are recalled; 0 means 5.
	K int
	// Floor and Full map cosine similarity to the selector's [0, 1] similarity:
	// at or below Floor is 0, at or above Full is 1. 0 means 0.3 and 0.8.
	Floor, Full float64
	// WarmTimeout bounds embedding the skills in the background; 0 means 2m.
	WarmTimeout time.Duration
	// Log receives background failures; nil means slog.Default().
	Log *slog.Logger
}

// Recaller is the embeddings recall source.
type Recaller struct {
	cfg      Config
	endpoint string

	mu      sync.Mutex
	vecs    map[string][]float32 // by skill key (digest)
	warming bool
}

// New checks cfg.
func New(cfg Config) (*Recaller, error) {
	if cfg.URL == "" || cfg.Model == "" {
		return nil, errors.New("embed: URL and Model are required")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("embed: URL %q is not an http or https URL", cfg.URL)
	}
	if !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/embeddings") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/embeddings"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Batch == 0 {
		cfg.Batch = 64
	}
	if cfg.K == 0 {
		cfg.K = 5
	}
	if cfg.Floor == 0 {
		cfg.Floor = 0.3
	}
	if cfg.Full == 0 {
		cfg.Full = 0.8
	}
	if cfg.WarmTimeout == 0 {
		cfg.WarmTimeout = 2 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Recaller{cfg: cfg, endpoint: u.String(), vecs: map[string][]float32{}}, nil
}

// Name is the recall source's name.
func (*Recaller) Name() string { return selector.SourceSemantic }

// Text is what is embedded for a skill.
func Text(s *skill.Skill) string {
	parts := []string{s.Name, s.Description}
	if len(s.Tags) > 0 {
		parts = append(parts, "Tags: "+strings.Join(s.Tags, ", "))
	}
	if len(s.Examples.Positive) > 0 {
		parts = append(parts, "Examples: "+strings.Join(s.Examples.Positive, "; "))
	}
	return strings.Join(parts, "\n")
}

func key(s *skill.Skill) string {
	if s.Digest != "" {
		return s.Digest
	}
	h := sha256.Sum256([]byte(Text(s)))
	return hex.EncodeToString(h[:])
}

// Cached reports how many skill vectors are held.
func (r *Recaller) Cached() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.vecs)
}

// Warm embeds the skills not cached yet, and forgets vectors of skills no longer
// given. It returns how many it embedded.
func (r *Recaller) Warm(ctx context.Context, skills []*skill.Skill) (int, error) {
	r.mu.Lock()
	keep := make(map[string]bool, len(skills))
	var todo []*skill.Skill
	for _, s := range skills {
		k := key(s)
		keep[k] = true
		if _, ok := r.vecs[k]; !ok {
			todo = append(todo, s)
		}
	}
	for k := range r.vecs {
		if !keep[k] {
			delete(r.vecs, k)
		}
	}
	r.mu.Unlock()
	n := 0
	for i := 0; i < len(todo); i += r.cfg.Batch {
		part := todo[i:min(i+r.cfg.Batch, len(todo))]
		texts := make([]string, len(part))
		for j, s := range part {
			texts[j] = Text(s)
		}
		vs, err := r.embed(ctx, texts)
		if err != nil {
			return n, err
		}
		r.mu.Lock()
		for j, s := range part {
			r.vecs[key(s)] = vs[j]
		}
		r.mu.Unlock()
		n += len(part)
	}
	return n, nil
}

// Recall embeds text and returns the K skills nearest to it. Skills without a vector
// yet are embedded in the background and left out of this answer.
func (r *Recaller) Recall(ctx context.Context, text string, skills []*skill.Skill) ([]selector.Recall, error) {
	r.mu.Lock()
	missing := false
	for _, s := range skills {
		if _, ok := r.vecs[key(s)]; !ok {
			missing = true
			break
		}
	}
	if missing && !r.warming {
		r.warming = true
		go func() {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.WarmTimeout)
			defer cancel()
			if _, err := r.Warm(wctx, skills); err != nil {
				r.cfg.Log.Warn("embed: embedding skills failed; semantic recall is partial", "err", err)
			}
			r.mu.Lock()
			r.warming = false
			r.mu.Unlock()
		}()
	}
	r.mu.Unlock()
	vs, err := r.embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	q := vs[0]
	type hit struct {
		name string
		cos  float64
	}
	var hits []hit
	r.mu.Lock()
	for _, s := range skills {
		if v, ok := r.vecs[key(s)]; ok && len(v) == len(q) {
			hits = append(hits, hit{s.Name, cosine(q, v)})
		}
	}
	r.mu.Unlock()
	sort.Slice(hits, func(i, j int) bool { return hits[i].cos > hits[j].cos })
	var out []selector.Recall
	for i := 0; i < len(hits) && i < r.cfg.K; i++ {
		sim := (hits[i].cos - r.cfg.Floor) / (r.cfg.Full - r.cfg.Floor)
		if sim <= 0 {
			break
		}
		out = append(out, selector.Recall{Name: hits[i].name, Source: selector.SourceSemantic, Similarity: math.Min(1, sim),
			Reason: fmt.Sprintf("cosine %.3f", hits[i].cos)})
	}
	return out, nil
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// maxResponse bounds an embeddings response.
const maxResponse = 64 << 20

func (r *Recaller) embed(ctx context.Context, texts []string) ([][]float32, error) {
	body, _ := json.Marshal(map[string]any{"model": r.cfg.Model, "input": texts})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.APIKey)
	}
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("embed: POST %s: %w", r.endpoint, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return nil, fmt.Errorf("embed: POST %s: reading the answer: %w", r.endpoint, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("embed: POST %s: %s: %s", r.endpoint, resp.Status, strings.TrimSpace(string(data[:min(len(data), 200)])))
	}
	if len(data) > maxResponse {
		return nil, fmt.Errorf("embed: POST %s: the answer is over %d MiB", r.endpoint, maxResponse>>20)
	}
	return Parse(data, len(texts))
}

// ErrMalformed is an embeddings answer that is not {"data": [{"index": i,
// "embedding": [numbers]}, ...]} with one vector per input, all of one length.
var ErrMalformed = errors.New("embed: malformed answer")

// Parse reads an embeddings response for n inputs, strictly, and returns the vectors
// in input order.
func Parse(body []byte, n int) ([][]float32, error) {
	var resp struct {
		Data *[]struct {
			Index     *int      `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if resp.Data == nil {
		return nil, fmt.Errorf("%w: no data list", ErrMalformed)
	}
	if len(*resp.Data) != n {
		return nil, fmt.Errorf("%w: %d vectors for %d inputs", ErrMalformed, len(*resp.Data), n)
	}
	out := make([][]float32, n)
	dim := -1
	for i, d := range *resp.Data {
		idx := i
		if d.Index != nil {
			idx = *d.Index
		}
		if idx < 0 || idx >= n || out[idx] != nil {
			return nil, fmt.Errorf("%w: data[%d] has index %d", ErrMalformed, i, idx)
		}
		if len(d.Embedding) == 0 || dim >= 0 && len(d.Embedding) != dim {
			return nil, fmt.Errorf("%w: data[%d] has a vector of %d numbers", ErrMalformed, i, len(d.Embedding))
		}
		for _, f := range d.Embedding {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return nil, fmt.Errorf("%w: data[%d] holds a non-finite number", ErrMalformed, i)
			}
		}
		dim = len(d.Embedding)
		out[idx] = d.Embedding
	}
	return out, nil
}

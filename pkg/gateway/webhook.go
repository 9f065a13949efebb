package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/client"
	"go.yaml.in/yaml/v3"
)

// Hook maps a plain JSON webhook, POSTed to /hooks/<name>, to a CloudEvent. The
// zero value takes any JSON body as type "<name>.webhook" with a content-derived id;
// GitHub's is:
//
//	github:
//	  type_prefix: com.github.
//	  type_header: X-GitHub-Event      # pull_request -> com.github.pull_request
//	  id_header: X-GitHub-Delivery
//	  signature_header: X-Hub-Signature-256
//	  secret_env: GITHUB_WEBHOOK_SECRET
type Hook struct {
	// Type is the CloudEvent type when TypeHeader is empty; default "<name>.webhook".
	Type string `yaml:"type" json:"type"`
	// TypeHeader names the request header whose value, after TypePrefix, is the type.
	TypeHeader string `yaml:"type_header" json:"type_header"`
	TypePrefix string `yaml:"type_prefix" json:"type_prefix"`
	// IDHeader names the header holding the delivery's unique id, the event's id (so
	// a redelivered webhook is deduplicated). Empty, or absent from a request: the
	// SHA-256 of the body.
	IDHeader string `yaml:"id_header" json:"id_header"`
	// Source is the CloudEvent source; default "/hooks/<name>".
	Source string `yaml:"source" json:"source"`
	// Skill, when set, invokes that skill explicitly instead of routing by type.
	Skill string `yaml:"skill" json:"skill"`
	// Secret (or the environment variable SecretEnv) is the HMAC-SHA256 key the
	// sender signs bodies with; SignatureHeader carries "sha256=<hex>" (default
	// X-Hub-Signature-256). Without a secret the hook takes the gateway's bearer
	// tokens instead.
	Secret          string `yaml:"secret" json:"secret"`
	SecretEnv       string `yaml:"secret_env" json:"secret_env"`
	SignatureHeader string `yaml:"signature_header" json:"signature_header"`
	// ReplayWindow is how long a body is remembered (a duration such as 72h;
	// default DefaultReplayWindow, at least 1s; "none" turns it off). A body the
	// hook took within the window is taken again as the delivery it was the first
	// time — the same event id and type, whatever the headers now say — so it
	// starts nothing new. A signature covers only the body: without this, anyone
	// holding one signed delivery could replay it as new events by changing the
	// id or type header. The record is kept on the bus (KV bucket hooks), shared
	// by every gateway and kept across restarts.
	ReplayWindow string `yaml:"replay_window" json:"replay_window"`
}

// DefaultReplayWindow is a hook's replay window when it sets none: a week, as long
// as the router remembers activations by default (bus.Config.JobsMaxAge), and
// longer than GitHub's three days of redeliveries.
const DefaultReplayWindow = 7 * 24 * time.Hour

// replayWindow is the hook's replay window; 0 when it is off.
func (h Hook) replayWindow() (time.Duration, error) {
	switch h.ReplayWindow {
	case "":
		return DefaultReplayWindow, nil
	case "none":
		return 0, nil
	}
	d, err := time.ParseDuration(h.ReplayWindow)
	if err != nil {
		return 0, fmt.Errorf("replay_window %q: want a duration such as 72h, or none", h.ReplayWindow)
	}
	if d < time.Second {
		return 0, fmt.Errorf("replay_window %s: it must be at least 1s (or none, to turn it off)", h.ReplayWindow)
	}
	return d, nil
}

// HooksFile is the file `skillbus gateway --hooks` reads.
type HooksFile struct {
	Hooks map[string]Hook `yaml:"hooks" json:"hooks"`
}

// LoadHooks reads a hooks file (YAML or JSON) and resolves secret_env with getenv.
// Unknown keys are errors: a misspelt secret_env must not leave a hook unsigned.
func LoadHooks(path string, getenv func(string) string) (map[string]Hook, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f HooksFile
	d := yaml.NewDecoder(bytes.NewReader(b))
	d.KnownFields(true)
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for name, h := range f.Hooks {
		if err := events.CheckToken("hook name", name); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.SecretEnv != "" {
			if h.Secret = getenv(h.SecretEnv); h.Secret == "" {
				return nil, fmt.Errorf("%s: hook %s: $%s is empty; it holds the webhook secret", path, name, h.SecretEnv)
			}
		}
		if h.Skill != "" {
			if err := events.CheckToken("skill", h.Skill); err != nil {
				return nil, fmt.Errorf("%s: hook %s: %w", path, name, err)
			}
		}
		if _, err := h.replayWindow(); err != nil {
			return nil, fmt.Errorf("%s: hook %s: %w", path, name, err)
		}
		// What every delivery would be refused for (client.CheckOutside) is refused
		// here, once, rather than as a 400 to every delivery.
		if h.Source != "" {
			if err := client.CheckOutsideSource(h.Source); err != nil {
				return nil, fmt.Errorf("%s: hook %s: %w", path, name, err)
			}
		}
		for _, t := range []string{h.Type, h.TypePrefix} {
			if strings.HasPrefix(t, "skill.") {
				return nil, fmt.Errorf("%s: hook %s: type %q: types beginning skill. are reserved (set skill: <name> to invoke a skill)", path, name, t)
			}
		}
		f.Hooks[name] = h
	}
	return f.Hooks, nil
}

// signatureHeader is the header a hook's signature comes in.
func (h Hook) signatureHeader() string {
	if h.SignatureHeader != "" {
		return h.SignatureHeader
	}
	return "X-Hub-Signature-256"
}

// Event maps a webhook request of the hook called name to a CloudEvent. The body
// must be JSON; it becomes the event's data.
func (h Hook) Event(name string, header http.Header, body []byte) (event.Event, error) {
	e := event.New()
	if !json.Valid(body) {
		return e, fmt.Errorf("%w: the webhook body is not JSON", ErrInvalidEvent)
	}
	typ := h.Type
	if h.TypeHeader != "" {
		v := header.Get(h.TypeHeader)
		if v == "" {
			return e, fmt.Errorf("%w: no %s header, which names the event type", ErrInvalidEvent, h.TypeHeader)
		}
		typ = h.TypePrefix + v
	}
	if typ == "" {
		typ = name + ".webhook"
	}
	id := ""
	if h.IDHeader != "" {
		id = header.Get(h.IDHeader)
	}
	if id == "" {
		sum := sha256.Sum256(body)
		id = hex.EncodeToString(sum[:16])
	}
	source := h.Source
	if source == "" {
		source = "/hooks/" + name
	}
	e.SetID(id)
	e.SetSource(source)
	e.SetType(typ)
	e.SetTime(time.Now())
	// The body as sent, byte for byte (re-encoding would, for one, escape '&').
	e.SetDataContentType(event.ApplicationJSON)
	e.DataEncoded = body
	if err := check(&e); err != nil {
		return e, err
	}
	return e, nil
}

// delivery is what the KV bucket hooks keeps of a hook's delivery, under the key
// <hook>.<hex SHA-256 of the body>, for the hook's replay window.
type delivery struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// firstDelivery makes e, the event of a body the hook called name was sent, the
// event of the first delivery of that body within the hook's replay window: it
// records e if the body is new, or else takes the recorded id and type. Published
// again under its first id, the event is deduplicated as any event sent twice is.
func (g *Gateway) firstDelivery(ctx context.Context, name string, window time.Duration, body []byte, e *event.Event) error {
	sum := sha256.Sum256(body)
	key := name + "." + hex.EncodeToString(sum[:])
	rec, err := json.Marshal(delivery{ID: e.ID(), Type: e.Type()})
	if err != nil {
		return err
	}
	for range 3 {
		_, err := g.replay.Create(ctx, key, rec, jetstream.KeyTTL(window))
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("recording the delivery in bucket %s: %w", g.replay.Bucket(), err)
		}
		ent, err := g.replay.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // its window just ended: record this one
		}
		if err != nil {
			return fmt.Errorf("reading the first delivery from bucket %s: %w", g.replay.Bucket(), err)
		}
		var first delivery
		if err := json.Unmarshal(ent.Value(), &first); err != nil || first.ID == "" || first.Type == "" {
			return fmt.Errorf("bucket %s: key %s does not hold a delivery: %q", g.replay.Bucket(), key, ent.Value())
		}
		if first.ID != e.ID() || first.Type != e.Type() {
			g.cfg.Log.Warn("gateway: a webhook body seen before came with other headers; taken as its first delivery",
				"hook", name, "id", e.ID(), "type", e.Type(), "first_id", first.ID, "first_type", first.Type)
		}
		e.SetID(first.ID)
		e.SetType(first.Type)
		return nil
	}
	return fmt.Errorf("bucket %s: key %s keeps appearing and expiring", g.replay.Bucket(), key)
}

// errUnknownHook is a /hooks/<name> that is not configured.
var errUnknownHook = errors.New("no such hook")

// openReplay checks every hook's replay window and, when a hook has one, opens the
// bucket the deliveries are recorded in.
func (g *Gateway) openReplay() error {
	need := false
	for name, h := range g.cfg.Hooks {
		w, err := h.replayWindow()
		if err != nil {
			return fmt.Errorf("gateway: hook %s: %w", name, err)
		}
		need = need || w > 0
	}
	if !need {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := g.cfg.Bus.KV(ctx, g.cfg.Bus.BucketHooks())
	if err != nil {
		return fmt.Errorf("gateway: webhooks record their deliveries in the KV bucket %s, which the registry creates (skillbus registry or skillbus dev, this version or later): %w",
			g.cfg.Bus.BucketHooks(), err)
	}
	g.replay = kv
	return nil
}

package gateway

import (
	"bytes"
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
	"github.com/skillbus/skillbus/events"
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

// errUnknownHook is a /hooks/<name> that is not configured.
var errUnknownHook = errors.New("no such hook")

func hookName(path string) (string, error) {
	name, ok := strings.CutPrefix(path, "/hooks/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%w: want /hooks/<name>", errUnknownHook)
	}
	return name, nil
}

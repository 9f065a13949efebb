package repair

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/skillbus/skillbus/pkg/failure"
)

// FromData returns the names around fault f — the name it failed on and the names
// the failing step saw — that the sender of a trigger whose data (JSON) is data
// chose (see Chosen): a key or anything inside a value, also once the skill
// decodes it (a string of JSON read with fromjson, a key spelt with escapes). A
// patch that writes one of them and is new to the skill waits for a person's
// approval, whatever the skill's repair mode (see Diagnosis.FromTrigger).
//
// Names are compared as NewNames splits them, identifier-like words: a key such as
// "evil-key" gives "evil" and "key", the words a patch would write.
func FromData(data []byte, f *failure.Fault) []string {
	if len(data) == 0 {
		return nil
	}
	var c Chosen
	c.AddData(data)
	var out []string
	for _, n := range append([]string{f.Name}, f.Have...) {
		for _, w := range nameRE.FindAllString(n, -1) {
			if c.Has(w) && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// Held returns the names of p that are new to the skill and that a sender chose:
// the names around the fault that the trigger's data held (d.FromTrigger), and any
// other that chosen has (nil: none). When any, the patch is not applied without
// approval.
func (p *Patch) Held(d *Diagnosis, chosen *Chosen) []string {
	var out []string
	for _, n := range p.NewNames {
		if slices.Contains(d.FromTrigger, n) || chosen.Has(n) {
			out = append(out, n)
		}
	}
	return out
}

// Diagnosis is what a repair job says about a failure: which skill version, which
// fault, the error, and what the failing step saw (redacted and cut to size).
type Diagnosis struct {
	// ID identifies the repair: Fingerprint of the skill digest and the fault.
	ID      string        `json:"id"`
	Skill   string        `json:"skill"`
	Version string        `json:"version,omitempty"`
	Digest  string        `json:"digest"`
	Fault   failure.Fault `json:"fault"`
	Error   string        `json:"error"`
	// Seen is what the failing step saw, as JSON: the names and values around the
	// fault, with secrets redacted and long values cut.
	Seen json.RawMessage `json:"seen,omitempty"`
	// FromTrigger are the names around the fault that the trigger's data holds
	// (FromData): a sender's choice, which auto-repair never writes by itself.
	FromTrigger []string `json:"from_trigger,omitempty"`
}

// Fingerprint identifies one fault of one skill version: executions failing with
// the same fingerprint wait for one repair.
func Fingerprint(digest string, f *failure.Fault) string {
	h := sha256.New()
	for _, s := range []string{digest, string(f.Kind), f.Step, f.Name} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// Budget bounds the repair of one skill and fault. The zero value of each field
// is its default.
type Budget struct {
	MaxAttempts int `json:"max_attempts,omitempty"` // patches tried; default 2
	MaxFiles    int `json:"max_files,omitempty"`    // files one patch may change; default 3
	MaxHunks    int `json:"max_hunks,omitempty"`    // hunks one patch may have; default 8
}

// WithDefaults returns b with its zero fields set to the defaults.
func (b Budget) WithDefaults() Budget {
	if b.MaxAttempts == 0 {
		b.MaxAttempts = 2
	}
	if b.MaxFiles == 0 {
		b.MaxFiles = 3
	}
	if b.MaxHunks == 0 {
		b.MaxHunks = 8
	}
	return b
}

// ErrOverBudget is a patch bigger than the budget allows, or an attempt beyond it.
var ErrOverBudget = errors.New("repair: over budget")

// Allows reports why a patch of size st is over the budget, or nil.
func (b Budget) Allows(st Stats) error {
	b = b.WithDefaults()
	if st.Files > b.MaxFiles {
		return fmt.Errorf("%w: the patch changes %d files; at most %d", ErrOverBudget, st.Files, b.MaxFiles)
	}
	if st.Hunks > b.MaxHunks {
		return fmt.Errorf("%w: the patch has %d hunks; at most %d", ErrOverBudget, st.Hunks, b.MaxHunks)
	}
	return nil
}

// Patch is a proposed repair: a unified diff against the skill's files.
type Patch struct {
	Diff    string `json:"diff"`
	By      string `json:"by"`      // the repairer that proposed it
	Summary string `json:"summary"` // one line for people
	Stats   Stats  `json:"stats"`
	// Files are the patched files (not serialised: the diff says it all).
	Files Files `json:"-"`
	// NewNames are the names the patch writes that appear nowhere in the skill's
	// files before it (see NewNames).
	NewNames []string `json:"new_names,omitempty"`
}

// nameRE finds the names a patch writes: identifier-like words, and the values
// that name where a call goes without any letter — an IPv4 address, an IPv6
// one (two colons or more), a number of three digits or more (a port) — which a
// sender could otherwise steer a repair to ("use the backup address 127.0.0.2").
// Shorter numbers are left out: an index or a count that a repair changes, 0 to
// 1, is in most triggers' data.
var nameRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*|[0-9]+(?:\.[0-9]+){3}|[0-9A-Fa-f]*:[0-9A-Fa-f]*:[0-9A-Fa-f:.]*|[0-9]{3,}`)

// NewNames returns, sorted, the names (identifier-like words, addresses and
// numbers of three digits or more: see nameRE) in the files after changes that
// occur in no file of before. A repairer takes the names it writes from what the
// failing run saw (the keys of a tool's reply, of a trigger's data): a name the
// skill does not already contain came from there.
func NewNames(before, after Files) []string {
	known := map[string]bool{}
	for _, text := range before {
		for _, n := range nameRE.FindAllString(text, -1) {
			known[n] = true
		}
	}
	found := map[string]bool{}
	for p, text := range after {
		if before[p] == text {
			continue
		}
		for _, n := range nameRE.FindAllString(text, -1) {
			if !known[n] {
				found[n] = true
			}
		}
	}
	out := make([]string, 0, len(found))
	for n := range found {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrNoProposal: a repairer has nothing to propose for this diagnosis.
var ErrNoProposal = errors.New("repair: no proposal")

// A Repairer proposes a diff for a diagnosis, or returns ErrNoProposal.
type Repairer interface {
	Name() string
	Propose(ctx context.Context, d *Diagnosis, files Files) (diff, summary string, err error)
}

// Validator checks patched files as the registry would; nil means valid.
type Validator func(ctx context.Context, skill string, files Files) error

// Attempt is the outcome of one repairer's try, for the events and the record.
type Attempt struct {
	By    string `json:"by"`
	Error string `json:"error,omitempty"`
}

// Propose asks each repairer in turn until one's diff applies to a copy of files,
// stays within budget and passes validate; it returns that patch and the failed
// tries before it. attempts is how many attempts this skill and fault have spent
// already: each diff that is applied and judged spends one, and none is judged
// once budget.MaxAttempts are spent. A repairer with nothing to propose spends
// nothing.
func Propose(ctx context.Context, d *Diagnosis, files Files, repairers []Repairer, validate Validator, budget Budget, attempts int) (*Patch, []Attempt, error) {
	budget = budget.WithDefaults()
	var tried []Attempt
	for _, r := range repairers {
		if attempts >= budget.MaxAttempts {
			return nil, tried, fmt.Errorf("%w: %d attempts spent on this fault", ErrOverBudget, attempts)
		}
		diff, summary, err := r.Propose(ctx, d, files)
		if errors.Is(err, ErrNoProposal) {
			continue
		}
		if ctx.Err() != nil {
			return nil, tried, ctx.Err()
		}
		attempts++
		if err != nil {
			tried = append(tried, Attempt{By: r.Name(), Error: err.Error()})
			continue
		}
		p, err := check(ctx, d.Skill, files, diff, validate, budget)
		if err != nil {
			tried = append(tried, Attempt{By: r.Name(), Error: err.Error()})
			continue
		}
		p.By, p.Summary = r.Name(), summary
		return p, tried, nil
	}
	return nil, tried, ErrNoProposal
}

// check applies diff to a copy of files, and checks the budget and validation.
func check(ctx context.Context, skill string, files Files, diff string, validate Validator, budget Budget) (*Patch, error) {
	patched, st, err := Apply(files, diff)
	if err != nil {
		return nil, err
	}
	if err := budget.Allows(st); err != nil {
		return nil, err
	}
	if validate != nil {
		if err := validate(ctx, skill, patched); err != nil {
			return nil, fmt.Errorf("repair: the patched skill does not validate: %w", err)
		}
	}
	return &Patch{Diff: diff, Stats: st, Files: patched, NewNames: NewNames(files, patched)}, nil
}

// BudgetKey identifies a skill and fault across versions: the attempts of every
// version's repair of the same mistake count against one budget.
func BudgetKey(skill string, f *failure.Fault) string {
	return Fingerprint("skill:"+skill, f)
}

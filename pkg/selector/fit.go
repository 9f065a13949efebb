package selector

import (
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Fitted are routing settings chosen on labelled cases (Fit): the keyword index's
// field weights and BM25 parameters, and the threshold. It is read and written as
// YAML.
type Fitted struct {
	Name        float32 `yaml:"name"`
	Description float32 `yaml:"description"`
	K1          float64 `yaml:"k1"`
	B           float64 `yaml:"b"`
	Threshold   float64 `yaml:"threshold"`
	// Bigram is how much adjacent word pairs count (Weights.Bigram); absent keeps
	// DefaultWeights' 0.5, 0 turns pairs off.
	Bigram *float32 `yaml:"bigram,omitempty"`
	// Feedback is the weight of pseudo-relevance feedback on every request
	// (Config.Feedback); absent or 0 is the default, feedback on long requests only.
	Feedback float64 `yaml:"feedback,omitempty"`
	// Top1 and Recall5 are the figures on the cases fitted on.
	Top1    float64 `yaml:"top1"`
	Recall5 float64 `yaml:"recall5"`
}

// Apply puts the fitted settings into a configuration.
func (f Fitted) Apply(c Config) Config {
	if c.Index == (Weights{}) {
		c.Index = DefaultWeights
	}
	c.Index.Name, c.Index.Description, c.Index.K1, c.Index.B = f.Name, f.Description, f.K1, f.B
	if f.Bigram != nil {
		c.Index.Bigram = *f.Bigram
	}
	c.Threshold = f.Threshold
	c.Feedback = f.Feedback
	return c
}

// ReadFitted reads a Fitted from YAML; name names it in errors.
func ReadFitted(r io.Reader, name string) (Fitted, error) {
	var f Fitted
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%s: %v (want name, description, k1, b and threshold, as 'skillbus route fit' writes)", name, err)
	}
	switch {
	// Written so that NaN fails each check.
	case !(f.Name > 0 && f.Description > 0 && f.Name < 1e6 && f.Description < 1e6):
		return f, fmt.Errorf("%s: name and description weights must be positive", name)
	case !(f.K1 > 0 && f.K1 < 1e6 && f.B >= 0 && f.B <= 1):
		return f, fmt.Errorf("%s: k1 must be positive and b in [0, 1]", name)
	case !(f.Threshold > 0 && f.Threshold <= 1):
		return f, fmt.Errorf("%s: threshold must be in (0, 1]", name)
	case f.Bigram != nil && !(*f.Bigram >= 0 && *f.Bigram < 1e6):
		return f, fmt.Errorf("%s: bigram must be 0 or more", name)
	case !(f.Feedback >= 0 && f.Feedback <= 10):
		return f, fmt.Errorf("%s: feedback must be in [0, 10]", name)
	}
	return f, nil
}

// WriteYAML writes f as YAML.
func (f Fitted) WriteYAML(w io.Writer) error {
	b, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// FitGrid are the settings Fit tries.
type FitGrid struct {
	Name, Description, Bigram []float32
	K1, B, Threshold          []float64
	// Feedback are the pseudo-relevance feedback weights tried on every request; 0
	// is the default (long requests only); empty means only that.
	Feedback []float64
}

// DefaultFitGrid is a small grid around the defaults, each list starting at the
// default so that a tie keeps it.
var DefaultFitGrid = FitGrid{
	Name: []float32{3, 1, 5}, Description: []float32{1}, Bigram: []float32{0.5, 0}, K1: []float64{1.2}, B: []float64{0.75, 0.5},
	Threshold: []float64{0.65, 0.6, 0.7, 0.55}, Feedback: []float64{0, 0.3},
}

// Fit tries every setting of the grid on the cases and returns the one with the best
// top-1 accuracy, then recall@5, then the one nearest the defaults (the first tried
// of equals: the grid's values are tried in order). Fit on a tuning half and measure
// on a held-out one: the figures of Fitted are on the cases fitted on.
func Fit(skills []*skill.Skill, cases []Case, base Config, g FitGrid) Fitted {
	var best Fitted
	found := false
	bigrams := g.Bigram
	if len(bigrams) == 0 {
		bigrams = []float32{DefaultWeights.Bigram}
	}
	feedbacks := g.Feedback
	if len(feedbacks) == 0 {
		feedbacks = []float64{0}
	}
	for _, n := range g.Name {
		for _, d := range g.Description {
			for _, bg := range bigrams {
				for _, k1 := range g.K1 {
					for _, b := range g.B {
						for _, fb := range feedbacks {
							// The index is built once for every threshold: only the plan differs.
							x := New(Fitted{Name: n, Description: d, Bigram: &bg, K1: k1, B: b, Threshold: g.Threshold[0], Feedback: fb}.Apply(base))
							x.Sync(skills)
							for _, t := range g.Threshold {
								f := Fitted{Name: n, Description: d, Bigram: &bg, K1: k1, B: b, Threshold: t, Feedback: fb}
								x.cfg.Threshold = t
								_, s := evaluate(x, cases, Env{}, false, true)
								f.Top1, f.Recall5 = s.Top1, s.Recall5
								if !found || f.Top1 > best.Top1 || f.Top1 == best.Top1 && f.Recall5 > best.Recall5 {
									best, found = f, true
								}
							}
						}
					}
				}
			}
		}
	}
	return best
}

// String is a one-line summary.
func (f Fitted) String() string {
	bg := DefaultWeights.Bigram
	if f.Bigram != nil {
		bg = *f.Bigram
	}
	fb := "feedback on long requests"
	if f.Feedback > 0 {
		fb = fmt.Sprintf("feedback %g", f.Feedback)
	}
	return fmt.Sprintf("name ×%g, description ×%g, word pairs ×%g, k1 %g, b %g, %s, threshold %g: top-1 %.3f, recall@5 %.3f",
		f.Name, f.Description, bg, f.K1, f.B, fb, f.Threshold, f.Top1, f.Recall5)
}

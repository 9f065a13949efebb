package repair_test

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/repair"
)

// A name a sender chose is found in whatever the skill could decode it from, however
// deep; a name the data does not spell is not.
func TestChosenSeesDecodedNames(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(`{"titel": 1}`))
	for _, tc := range []struct {
		data string
		has  bool
	}{
		{`{"titel": 1}`, true},
		{`{"t\u0069tel": 1}`, true},
		{`{"payload": "{\"t\\u0069tel\": \"x\"}"}`, true}, // a string of JSON, its key escaped
		{`{"p": "{\"q\": \"{\\\"r\\\": \\\"{\\\\\\\"titel\\\\\\\": 1}\\\"}\"}"}`, true}, // JSON three strings deep
		{`{"p": "` + b64 + `"}`, true},                            // base64
		{`{"p": "x=` + b64 + `&y=1"}`, true},                      // base64 inside a value
		{`{"p": "` + url.QueryEscape(`{"titel":1}`) + `"}`, true}, // percent-encoded
		{`{"p": "%74%69%74%65%6c"}`, true},
		{`{"p": "&#116;itel"}`, true}, // HTML
		{`{"p": "746974656c"}`, true}, // hex
		{`{"p": "TITEL"}`, true},      // upper
		{`{"p": "ti-tel"}`, true},     // replace("-", "")
		{`{"p": "letit"}`, true},      // reverse
		{`{"p": "\\x74itel"}`, true},  // an escape in a YAML or Starlark string
		{`not json titel`, true},
		{`{"title": "x", "body": "tit el"}`, true},
		{`{"title": "x", "body": "y"}`, false},
		{`{"tite": 1}`, false},
	} {
		var c repair.Chosen
		c.AddData([]byte(tc.data))
		if got := c.Has("titel"); got != tc.has {
			t.Errorf("%s: has titel = %v, want %v", tc.data, got, tc.has)
		}
	}
}

// Beyond its bound, every name counts as chosen.
func TestChosenOverItsBoundChoosesEverything(t *testing.T) {
	var c repair.Chosen
	c.AddData([]byte(`"` + strings.Repeat("a", repair.MaxChosenBytes) + `"`))
	if !c.Has("anything") {
		t.Fatal("a name is not chosen past the bound")
	}
}

package llm

import (
	"github.com/skillbus/skillbus/pkg/tool"
	"regexp"
	"strings"
)

// fenced matches a reply that is exactly one fenced code block, as models
// like to wrap JSON: ```json\n{...}\n```.
var fenced = regexp.MustCompile("(?s)\\A\\s*```[A-Za-z0-9_-]*[ \\t]*\\r?\\n(.*?)\\r?\\n?```\\s*\\z")

// ParseJSON returns the JSON value of a model's reply and whether it is one: the
// whole text, or the whole of one fenced code block, is a JSON object or
// array. Numbers become int64 or float64, as in every tool result.
func ParseJSON(text string) (any, bool) {
	s := strings.TrimSpace(text)
	if m := fenced.FindStringSubmatch(s); m != nil {
		s = strings.TrimSpace(m[1])
	}
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	v, err := tool.DecodeJSON([]byte(s))
	if err != nil {
		return nil, false
	}
	return v, true
}

// Content is a reply as a result: its JSON value when it is a JSON object or
// array (ParseJSON), else the text itself.
func Content(text string) any {
	if v, ok := ParseJSON(text); ok {
		return v
	}
	return text
}

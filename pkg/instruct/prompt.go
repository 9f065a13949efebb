package instruct

import (
	"fmt"
	"strings"

	"github.com/skillbus/skillbus/pkg/skill"
)

// readable returns the files of the skill a model may read: its text resources
// (skill.Resource.Inline), in catalog order.
func readable(s *skill.Skill) []skill.Resource {
	var out []skill.Resource
	for _, r := range s.Resources {
		if r.Inline && !r.Binary {
			out = append(out, r)
		}
	}
	return out
}

// systemPrompt is the skill's instructions, followed by the list of its files
// when the model can read them: progressive disclosure, the instructions at once,
// the files on request, so the prompt stays small.
func systemPrompt(instructions string, files []skill.Resource) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(instructions))
	if len(files) > 0 {
		b.WriteString("\n\n## Skill files\n\nThis skill comes with these files. Read one with the ")
		b.WriteString(ReadReferenceTool)
		b.WriteString(" tool when you need it:\n\n")
		for _, r := range files {
			fmt.Fprintf(&b, "- %s (%s, %s)\n", r.Path, r.Kind, size(r.Size))
		}
	}
	return b.String()
}

func size(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1000)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1000/1000)
}

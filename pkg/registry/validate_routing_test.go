package registry_test

import (
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Validating files also checks that each skill's examples route to it.
func TestValidateWarnsWhenExamplesRouteElsewhere(t *testing.T) {
	t.Parallel()
	resp, err := registry.Validate(registry.ValidateRequest{Files: map[string]string{
		"pdf-summarizer/SKILL.md": "---\nname: pdf-summarizer\ndescription: Summarize PDF documents.\nexamples:\n  positive: [\"convert 10 miles to kilometers\"]\n---\nSummarize the PDF the user gives into its key points, briefly.\n",
		"unit-converter/SKILL.md": "---\nname: unit-converter\ndescription: Convert miles, kilometers and other units.\n---\nConvert the quantity the user gives into the unit they ask for.\n",
	}}, skill.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range resp.Diagnostics {
		if d.Severity == skill.SeverityWarning && strings.Contains(d.Message, "routes to unit-converter, not to pdf-summarizer") && d.File == "pdf-summarizer/SKILL.md" {
			found = true
		}
	}
	if !found || !resp.Valid || resp.Warnings == 0 {
		t.Fatalf("response = %+v", resp)
	}
}

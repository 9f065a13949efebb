package tool_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/tool"
)

// Bound permissions put on a context are what WithPermissions puts there, they
// replace the permissions of the context they are put on, and the caller's slice
// is not theirs.
func TestBoundPermissions(t *testing.T) {
	t.Parallel()
	p := tool.Permissions{Network: true, Env: []string{"HOME"}, Limits: tool.Limits{CPUSeconds: 2}, MaxOutputBytes: 10}
	b := tool.BindPermissions(p)
	p.Env[0] = "CHANGED"
	outer := tool.WithPermissions(context.Background(), tool.Permissions{Network: true, Env: []string{"PATH"}})
	want := tool.Permissions{Network: true, Env: []string{"HOME"}, Limits: tool.Limits{CPUSeconds: 2}, MaxOutputBytes: 10}
	for range 2 { // one binding serves many contexts
		if diff := cmp.Diff(want, tool.PermissionsFrom(b.On(outer))); diff != "" {
			t.Errorf("permissions (-want +got):\n%s", diff)
		}
	}
	if diff := cmp.Diff(tool.Permissions{}, tool.PermissionsFrom(tool.BoundPermissions{}.On(outer))); diff != "" {
		t.Errorf("the zero BoundPermissions grant nothing (-want +got):\n%s", diff)
	}
}

package tool_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/tool"
)

// A 422 that names the field it wanted becomes a parameter fault naming it and the
// fields that were sent.
func TestHTTPParameterFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"message":"Validation Failed","errors":[{"field":"title","code":"missing_field"}]}`, "title"},
		{`{"error":"bad","param":"title"}`, "title"},
		{`missing field "title"`, "title"},
		{`nope`, ""},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(tc.body))
		}))
		t.Cleanup(srv.Close)
		h := tool.NewHTTP(tool.HTTPConfig{Client: srv.Client()})
		_, err := h.Call(netCtx(t), httpCall(map[string]any{"url": srv.URL, "method": "POST", "json": map[string]any{"titel": "x", "body": "y"}}))
		f := failure.FaultOf(err)
		if f == nil || f.Kind != failure.FaultParameter || f.Name != tc.want || !slices.Equal(f.Have, []string{"body", "titel"}) {
			t.Errorf("body %s: fault %+v (err %v)", tc.body, f, err)
		}
		if failure.ClassOf(err) != failure.Repairable {
			t.Errorf("class %s", failure.ClassOf(err))
		}
	}
}

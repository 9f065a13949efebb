package otlp_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/skillbus/skillbus/internal/otlp"
)

// An export request is read up to MaxExport bytes once unzipped: a small gzipped
// body that unzips to more is refused with 413, not read into memory whole.
func TestDecodeBoundsTheBody(t *testing.T) {
	// More than MaxExport zero bytes unzipped, as gzip members of 1 MiB each (a gzip
	// reader reads every member of a body): compressing the 32 MiB in one was most of
	// the test's time under -race.
	var member, zipped bytes.Buffer
	zw := gzip.NewWriter(&member)
	if _, err := zw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	for range otlp.MaxExport>>20 + 1 {
		zipped.Write(member.Bytes())
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/traces", &zipped)
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Content-Type", "application/x-protobuf")
	if _, code, err := otlp.Decode(req); code != http.StatusRequestEntityTooLarge || err == nil {
		t.Errorf("a body of %d bytes unzipped: %d %v, want 413", otlp.MaxExport+1, code, err)
	}

	req = httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(nil))
	req.Header.Set("Content-Type", "application/x-protobuf")
	if spans, code, err := otlp.Decode(req); code != http.StatusOK || err != nil || len(spans) != 0 {
		t.Errorf("an empty export: %v %d %v, want no spans and 200", spans, code, err)
	}
}

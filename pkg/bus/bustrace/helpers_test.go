package bustrace_test

import (
	"testing"

	"go.opentelemetry.io/otel"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// restoreGlobals puts back the global providers telemetry.Setup replaced.
func restoreGlobals(t *testing.T) {
	tp, mp, prop := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(tp)
		otel.SetMeterProvider(mp)
		otel.SetTextMapPropagator(prop)
	})
}

package main

import (
	"os"

	corev1 "k8s.io/api/core/v1"
	"path/filepath"
	"strings"
	"testing"
)

func TestOverlays(t *testing.T) {
	dirs, _ := filepath.Glob("../overlays/*")
	if len(dirs) < 2 {
		t.Fatalf("overlays: %v", dirs)
	}
	for _, dir := range dirs {
		sum, err := Check(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		t.Log(sum)
	}
	objs, yml, err := Build("../overlays/production")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(yml), "image: ghcr.io/skillbus/skillbus:v0.1.0") || strings.Contains(string(yml), ":latest") {
		t.Errorf("production does not pin the image:\n%s", yml)
	}
	r, err := decode(objs)
	if err != nil {
		t.Fatal(err)
	}
	var conf corev1.ConfigMap
	for name, cm := range r.configMaps {
		if strings.HasPrefix(name, "nats-config") {
			conf = cm
		}
	}
	if !strings.Contains(conf.Data["nats.conf"], "include ./nats-accounts.conf") || !strings.Contains(conf.Data["nats-accounts.conf"], "user: worker") {
		t.Errorf("nats-config lacks nats.conf including nats-accounts.conf: %v", conf.Data)
	}
}

// base is a minimal valid kustomization; each case breaks one thing.
const base = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: skillbus
resources: [app.yaml]
configMapGenerator:
  - name: skills
    files: [hello.SKILL.md, hello.skill.yaml]
`

const app = `apiVersion: apps/v1
kind: Deployment
metadata: {name: worker-default}
spec:
  selector: {matchLabels: {app: w}}
  template:
    metadata: {labels: {app: w}}
    spec:
      containers:
        - name: worker
          image: skillbus
          command: ["/usr/local/bin/worker", "--pools", "default", "--metrics-addr", ":9090"]
          ports: [{name: http, containerPort: 9090}]
          livenessProbe: {httpGet: {path: /livez, port: http}}
          readinessProbe: {httpGet: {path: "/readyz", port: http}}
          resources: {requests: {cpu: 250m, memory: 64Mi}, limits: {memory: 1Gi}}
          volumeMounts: [{name: skills, mountPath: /skills}]
      volumes:
        - name: skills
          configMap:
            name: skills
            items:
              - {key: hello.SKILL.md, path: hello/SKILL.md}
              - {key: hello.skill.yaml, path: hello/skill.yaml}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: worker-default}
spec:
  scaleTargetRef: {name: worker-default}
  triggers:
    - type: nats-jetstream
      metadata: {stream: SKILLBUS_JOBS, consumer: worker-default}
`

func TestCatches(t *testing.T) {
	tests := []struct {
		name, want string
		edit       func(string) string
	}{
		{"valid", "", func(s string) string { return s }},
		{"invalid YAML", "kustomize build", func(s string) string {
			return strings.Replace(s, `{httpGet: {path: "/readyz", port: http}}`, `{httpGet: {path: /readyz?x=y: z, port: http}}`, 1)
		}},
		{"unknown field", `unknown field "replica"`, func(s string) string {
			return strings.Replace(s, "spec:\n  selector", "spec:\n  replica: 2\n  selector", 1)
		}},
		{"wrong type", "cannot unmarshal", func(s string) string { return strings.Replace(s, "containerPort: 9090", `containerPort: "x"`, 1) }},
		{"pool without a scaler", "serves pool gpu", func(s string) string {
			return strings.Replace(s, `"--pools", "default"`, `"--pools", "default,gpu"`, 1)
		}},
		{"key left out of the skills volume", "leaves out key hello.skill.yaml", func(s string) string {
			return strings.Replace(s, "              - {key: hello.skill.yaml, path: hello/skill.yaml}\n", "", 1)
		}},
		{"probe not on the health endpoints", "liveness probe is not GET /livez", func(s string) string { return strings.Replace(s, "/livez", "/healthz", 1) }},
		{"no memory limit", "no memory limit", func(s string) string { return strings.Replace(s, ", limits: {memory: 1Gi}", "", 1) }},
		{"no cpu request", "no cpu request", func(s string) string { return strings.Replace(s, "cpu: 250m, ", "", 1) }},
		{"missing secret", "Secret nope does not exist", func(s string) string {
			return strings.Replace(s, "          volumeMounts:", "          envFrom: [{secretRef: {name: nope}}]\n          volumeMounts:", 1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range map[string]string{"kustomization.yaml": base, "app.yaml": tt.edit(app), "hello.SKILL.md": "---\nname: hello\n---\n", "hello.skill.yaml": "steps: []\n"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Check(dir)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("valid manifests fail: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

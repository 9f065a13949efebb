// Command check builds every Kustomize overlay of deploy/ as `kubectl kustomize` would
// (with kustomize's own Go packages) and checks each object it renders: decoded
// strictly into the Kubernetes API types (an unknown or misspelt field, or a value of
// the wrong type, fails, as kubeconform would), and cross-checked — every ConfigMap
// and Secret a pod uses exists with the keys it names, probes use declared ports,
// every worker pool has a KEDA trigger on its consumer, every skillbus service is
// probed on /livez and /readyz and has CPU and memory requests and a memory limit.
//
//	go run . ../overlays/dev ../overlays/production
//
// It is a module of its own so that kustomize's and Kubernetes' dependencies stay out
// of skillbus's go.mod; `make test` runs it.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		matches, _ := filepath.Glob("../overlays/*")
		dirs = matches
	}
	failed := false
	for _, dir := range dirs {
		sum, err := Check(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", dir, err)
			failed = true
			continue
		}
		fmt.Println(sum)
	}
	if failed {
		os.Exit(1)
	}
}

// External are the Secrets the manifests use but do not contain: TLS material and,
// in production, the passwords.
var External = []string{"nats-tls", "nats-users"}

// object is one rendered object: its identity and JSON.
type object struct {
	apiVersion, kind, name, namespace string
	json                              []byte
}

// Build renders an overlay like `kubectl kustomize DIR`.
func Build(dir string) ([]object, []byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, nil, fmt.Errorf("kustomize build: %w", err)
	}
	yml, err := rm.AsYaml()
	if err != nil {
		return nil, nil, err
	}
	var out []object
	for _, r := range rm.Resources() {
		j, err := r.MarshalJSON()
		if err != nil {
			return nil, nil, err
		}
		out = append(out, object{apiVersion: r.GetApiVersion(), kind: r.GetKind(), name: r.GetName(), namespace: r.GetNamespace(), json: j})
	}
	return out, yml, nil
}

// ScaledObject is KEDA's keda.sh/v1alpha1 ScaledObject, as far as skillbus uses it;
// an unknown field fails the strict decode like any other.
type ScaledObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			Name       string `json:"name"`
			Kind       string `json:"kind,omitempty"`
			APIVersion string `json:"apiVersion,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
		MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Name     string            `json:"name,omitempty"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

func strict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// rendered holds the decoded objects of one overlay.
type rendered struct {
	namespaces   []corev1.Namespace
	services     []corev1.Service
	configMaps   map[string]corev1.ConfigMap
	secrets      map[string]corev1.Secret
	deployments  []appsv1.Deployment
	statefulSets []appsv1.StatefulSet
	scaled       []ScaledObject
	kinds        map[string]int
}

func decode(objs []object) (*rendered, error) {
	r := &rendered{configMaps: map[string]corev1.ConfigMap{}, secrets: map[string]corev1.Secret{}, kinds: map[string]int{}}
	var errs []string
	for _, o := range objs {
		id := fmt.Sprintf("%s %s/%s", o.kind, o.namespace, o.name)
		var err error
		switch o.apiVersion + " " + o.kind {
		case "v1 Namespace":
			var v corev1.Namespace
			err = strict(o.json, &v)
			r.namespaces = append(r.namespaces, v)
		case "v1 Service":
			var v corev1.Service
			err = strict(o.json, &v)
			r.services = append(r.services, v)
		case "v1 ConfigMap":
			var v corev1.ConfigMap
			err = strict(o.json, &v)
			r.configMaps[v.Name] = v
		case "v1 Secret":
			var v corev1.Secret
			err = strict(o.json, &v)
			r.secrets[v.Name] = v
		case "apps/v1 Deployment":
			var v appsv1.Deployment
			err = strict(o.json, &v)
			r.deployments = append(r.deployments, v)
		case "apps/v1 StatefulSet":
			var v appsv1.StatefulSet
			err = strict(o.json, &v)
			r.statefulSets = append(r.statefulSets, v)
		case "keda.sh/v1alpha1 ScaledObject":
			var v ScaledObject
			err = strict(o.json, &v)
			r.scaled = append(r.scaled, v)
		default:
			err = fmt.Errorf("no schema known for %s %s", o.apiVersion, o.kind)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", id, err))
		}
		if o.kind != "Namespace" && o.namespace != "skillbus" {
			errs = append(errs, fmt.Sprintf("%s: namespace %q, want skillbus", id, o.namespace))
		}
		r.kinds[o.kind]++
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("schema:\n  %s", strings.Join(errs, "\n  "))
	}
	return r, nil
}

// Check builds and checks one overlay, returning a one-line summary.
func Check(dir string) (string, error) {
	objs, _, err := Build(dir)
	if err != nil {
		return "", err
	}
	r, err := decode(objs)
	if err != nil {
		return "", err
	}
	external, errs := r.references()
	if len(errs) > 0 {
		return "", fmt.Errorf("references:\n  %s", strings.Join(errs, "\n  "))
	}
	kinds := make([]string, 0, len(r.kinds))
	for k, n := range r.kinds {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	ext := "none"
	if len(external) > 0 {
		ext = "Secret " + strings.Join(external, ", Secret ")
	}
	return fmt.Sprintf("%s: kustomize build ok, %d objects (%s); strict schema ok; references ok; provided outside: %s",
		filepath.Base(dir), len(objs), strings.Join(kinds, ", "), ext), nil
}

type pod struct {
	owner string
	spec  corev1.PodSpec
	sel   map[string]string
	lbls  map[string]string
}

// refs collects what references finds: the errors, and the Secrets that must be
// provided outside the manifests.
type refs struct {
	r    *rendered
	ext  map[string]bool
	errs []string
}

func (c *refs) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// references cross-checks the objects; it returns the Secrets that must be provided
// outside the manifests.
func (r *rendered) references() (external []string, errs []string) {
	var pods []pod
	deployments := map[string]bool{}
	for _, d := range r.deployments {
		pods = append(pods, pod{"Deployment " + d.Name, d.Spec.Template.Spec, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels})
		deployments[d.Name] = true
	}
	for _, s := range r.statefulSets {
		pods = append(pods, pod{"StatefulSet " + s.Name, s.Spec.Template.Spec, s.Spec.Selector.MatchLabels, s.Spec.Template.Labels})
	}
	c := &refs{r: r, ext: map[string]bool{}}
	for _, p := range pods {
		for k, v := range p.sel {
			if p.lbls[k] != v {
				c.errorf("%s: selector %s=%s does not match the pod's labels", p.owner, k, v)
			}
		}
		vols := c.volumes(p)
		for _, ct := range p.spec.Containers {
			c.container(p, vols, ct)
		}
	}
	for _, s := range r.scaled {
		if !deployments[s.Spec.ScaleTargetRef.Name] {
			c.errorf("ScaledObject %s scales Deployment %s, which does not exist", s.Metadata.Name, s.Spec.ScaleTargetRef.Name)
		}
	}
	for name := range c.ext {
		external = append(external, name)
	}
	sort.Strings(external)
	return external, c.errs
}

// secret checks a reference to a Secret (and to one of its keys, when key is set).
func (c *refs) secret(owner, name, key string) {
	s, ok := c.r.secrets[name]
	switch {
	case !ok && slices.Contains(External, name):
		c.ext[name] = true
	case !ok:
		c.errorf("%s: Secret %s does not exist", owner, name)
	case key != "":
		_, a := s.Data[key]
		_, b := s.StringData[key]
		if !a && !b {
			c.errorf("%s: Secret %s has no key %s", owner, name, key)
		}
	}
}

// volumes checks a pod's ConfigMap and Secret volumes; it returns the volumes' names.
func (c *refs) volumes(p pod) map[string]bool {
	vols := map[string]bool{}
	for _, v := range p.spec.Volumes {
		vols[v.Name] = true
		switch {
		case v.ConfigMap != nil:
			c.configMapVolume(p.owner, v)
		case v.Secret != nil:
			c.secret(p.owner, v.Secret.SecretName, "")
			if s, ok := c.r.secrets[v.Secret.SecretName]; ok {
				for _, it := range v.Secret.Items {
					if _, ok := s.Data[it.Key]; !ok {
						c.errorf("%s: Secret %s has no key %s", p.owner, s.Name, it.Key)
					}
				}
			}
		}
	}
	return vols
}

// configMapVolume checks that a ConfigMap volume's items exist and, when it lists
// items, that it leaves none of the ConfigMap's keys out.
func (c *refs) configMapVolume(owner string, v corev1.Volume) {
	cm, ok := c.r.configMaps[v.ConfigMap.Name]
	if !ok {
		c.errorf("%s: volume %s: ConfigMap %s does not exist", owner, v.Name, v.ConfigMap.Name)
		return
	}
	used := map[string]bool{}
	for _, it := range v.ConfigMap.Items {
		used[it.Key] = true
		if _, ok := cm.Data[it.Key]; !ok {
			c.errorf("%s: volume %s: ConfigMap %s has no key %s", owner, v.Name, cm.Name, it.Key)
		}
	}
	if len(v.ConfigMap.Items) == 0 {
		return
	}
	for k := range cm.Data {
		if !used[k] {
			c.errorf("%s: volume %s leaves out key %s of ConfigMap %s", owner, v.Name, k, cm.Name)
		}
	}
}

// container checks one container's mounts, secret references and probes, and a
// skillbus service's health endpoints, resources and (for a worker) its scaling.
func (c *refs) container(p pod, vols map[string]bool, ct corev1.Container) {
	owner := p.owner + " container " + ct.Name
	ports := map[string]bool{}
	for _, cp := range ct.Ports {
		ports[cp.Name] = true
	}
	for _, m := range ct.VolumeMounts {
		if !vols[m.Name] && !slices.Contains(volumeClaims(c.r, p.owner), m.Name) {
			c.errorf("%s: mounts volume %s, which the pod does not have", owner, m.Name)
		}
	}
	for _, e := range ct.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			c.secret(owner, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
		}
	}
	for _, e := range ct.EnvFrom {
		if e.SecretRef != nil {
			c.secret(owner, e.SecretRef.Name, "")
		}
	}
	for what, pr := range map[string]*corev1.Probe{"liveness": ct.LivenessProbe, "readiness": ct.ReadinessProbe, "startup": ct.StartupProbe} {
		if pr == nil || pr.HTTPGet == nil {
			continue
		}
		if n := pr.HTTPGet.Port.StrVal; n != "" && !ports[n] {
			c.errorf("%s: %s probe on port %q, which the container does not declare", owner, what, n)
		}
	}
	if len(ct.Command) > 0 && strings.HasPrefix(ct.Command[0], "/usr/local/bin/") {
		c.service(owner, ct)
	}
	if len(ct.Command) > 0 && ct.Command[0] == "/usr/local/bin/worker" {
		c.errs = append(c.errs, c.r.scaledPools(strings.TrimPrefix(p.owner, "Deployment "), ct.Command)...)
	}
}

// service checks a skillbus service's container: probed on the health endpoints of
// --metrics-addr, with requests and limits.
func (c *refs) service(owner string, ct corev1.Container) {
	if ct.LivenessProbe == nil || ct.LivenessProbe.HTTPGet == nil || ct.LivenessProbe.HTTPGet.Path != "/livez" {
		c.errorf("%s: liveness probe is not GET /livez", owner)
	}
	if ct.ReadinessProbe == nil || ct.ReadinessProbe.HTTPGet == nil || ct.ReadinessProbe.HTTPGet.Path != "/readyz" {
		c.errorf("%s: readiness probe is not GET /readyz", owner)
	}
	if !slices.Contains(ct.Command, "--metrics-addr") {
		c.errorf("%s: probes need --metrics-addr", owner)
	}
	// Requests and limits are measured (docs/operations.md); a service without them
	// is scheduled blind or may take a node's memory.
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := ct.Resources.Requests[res]; !ok {
			c.errorf("%s: no %s request", owner, res)
		}
	}
	if _, ok := ct.Resources.Limits[corev1.ResourceMemory]; !ok {
		c.errorf("%s: no memory limit", owner)
	}
}

func volumeClaims(r *rendered, owner string) []string {
	var out []string
	for _, s := range r.statefulSets {
		if "StatefulSet "+s.Name == owner {
			for _, c := range s.Spec.VolumeClaimTemplates {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

// scaledPools checks that a worker Deployment has a ScaledObject with a trigger on the
// consumer of every pool it serves.
func (r *rendered) scaledPools(deployment string, cmd []string) []string {
	pools := []string{"default"}
	for i, a := range cmd {
		if a == "--pools" && i+1 < len(cmd) {
			pools = strings.Split(cmd[i+1], ",")
		} else if v, ok := strings.CutPrefix(a, "--pools="); ok {
			pools = strings.Split(v, ",")
		}
	}
	var errs []string
	for _, pool := range pools {
		found := false
		for _, s := range r.scaled {
			if s.Spec.ScaleTargetRef.Name != deployment {
				continue
			}
			for _, t := range s.Spec.Triggers {
				found = found || t.Type == "nats-jetstream" && t.Metadata["consumer"] == "worker-"+pool && t.Metadata["stream"] == "SKILLBUS_JOBS"
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("Deployment %s serves pool %s, but no ScaledObject scales it on consumer worker-%s", deployment, pool, pool))
		}
	}
	return errs
}

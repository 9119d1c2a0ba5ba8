package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// The chart's manifests are checked against the Kubernetes API's own Go
// types, without a cluster (kubeconform would need schemas from the
// network): every rendered object is decoded strictly into its
// k8s.io/api type as the API server decodes a request (sigs.k8s.io/json:
// an unknown field, a field spelled in another case, a duplicate key or a
// value of the wrong type is an error), so a typo in a template fails
// here rather than at `kubectl apply` (which drops some unknown fields
// with a warning only).

// The Prometheus Operator's kinds, as far as the chart uses them
// (monitoring.coreos.com/v1; the fields spelled as in its CRDs). Strict
// decoding refuses anything else.
type prometheusRule struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            ruleFile          `json:"spec"`
}

// ruleFile is a Prometheus rule file: a PrometheusRule's spec is one.
type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert         string            `json:"alert,omitempty"`
			Record        string            `json:"record,omitempty"`
			Expr          string            `json:"expr"`
			For           string            `json:"for,omitempty"`
			KeepFiringFor string            `json:"keep_firing_for,omitempty"`
			Labels        map[string]string `json:"labels,omitempty"`
			Annotations   map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		TargetLabels      []string             `json:"targetLabels,omitempty"`
		PodTargetLabels   []string             `json:"podTargetLabels,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		Endpoints []struct {
			Port          string `json:"port,omitempty"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
			HonorLabels   bool   `json:"honorLabels,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// kinds maps each apiVersion/kind the chart may render to its Go type. A
// kind not here fails the test: add its type with the template.
var kinds = map[string]func() any{
	"apps/v1/StatefulSet":                     func() any { return new(appsv1.StatefulSet) },
	"apps/v1/Deployment":                      func() any { return new(appsv1.Deployment) },
	"v1/Service":                              func() any { return new(corev1.Service) },
	"v1/ConfigMap":                            func() any { return new(corev1.ConfigMap) },
	"v1/Secret":                               func() any { return new(corev1.Secret) },
	"policy/v1/PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/Ingress":            func() any { return new(networkingv1.Ingress) },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return new(prometheusRule) },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return new(serviceMonitor) },
}

// decodeStrict decodes one YAML document into v as the API server would
// refuse it: duplicate keys, unknown fields, fields in another case and
// wrong types are errors.
func decodeStrict(doc []byte, v any) error {
	js, err := sigsyaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// object is one rendered manifest, decoded into its type.
type object struct {
	kind, name string
	obj        any
}

// decodeManifests splits helm's multi-document output and decodes each
// document strictly into its type.
func decodeManifests(out []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	var objs []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := sigsyaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("%s\n%s", err, doc)
		}
		if head.Kind == "" && head.APIVersion == "" { // only comments: an empty template
			continue
		}
		id := head.APIVersion + "/" + head.Kind
		mk, ok := kinds[id]
		if !ok {
			return nil, fmt.Errorf("%s %q: a kind this test does not know (add its k8s.io/api type to kinds)", id, head.Metadata.Name)
		}
		v := mk()
		if err := decodeStrict(doc, v); err != nil {
			return nil, fmt.Errorf("%s %q does not decode strictly into %T: %w", id, head.Metadata.Name, v, err)
		}
		if head.Metadata.Name == "" {
			return nil, fmt.Errorf("%s without a name", id)
		}
		objs = append(objs, object{head.Kind, head.Metadata.Name, v})
	}
}

// renderTyped renders the chart with extra helm arguments and decodes
// every manifest strictly.
func renderTyped(t *testing.T, args ...string) []object {
	t.Helper()
	all := append([]string{"template", "t", chart, "--namespace", "live", "--set", "image.repository=registry.example/tally"}, args...)
	objs, err := decodeManifests(runHelm(t, all...))
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	if len(objs) == 0 {
		t.Fatalf("helm %s rendered nothing", strings.Join(args, " "))
	}
	return objs
}

// examples lists deploy/helm/tally/examples: every file in it is rendered.
func examples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chart, "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	return files
}

// A typo, a field in the wrong case, a duplicate key or a wrong type in a
// manifest is refused; the same manifest spelled right is taken.
func TestStrictDecodingRefusesTypos(t *testing.T) {
	good := `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
        - name: c
          image: i
          resources: {requests: {cpu: "1"}}
          securityContext: {allowPrivilegeEscalation: false}
`
	if _, err := decodeManifests([]byte(good)); err != nil {
		t.Fatalf("a right manifest is refused: %v", err)
	}
	for _, bad := range []struct{ from, to string }{
		{"allowPrivilegeEscalation", "allowPrivilegeEscalaton"},                                                 // unknown
		{"runAsNonRoot", "RunAsNonRoot"},                                                                        // case
		{"securityContext: {runAsNonRoot: true}", "securityContext: {runAsNonRoot: true, runAsNonRoot: false}"}, // duplicate
		{`cpu: "1"`, "cpu: one"},                                                                                // not a quantity
		{"runAsNonRoot: true", `runAsNonRoot: "yes"`},                                                           // a string for a bool
		{"metadata: {name: x}", "metadata: {name: x}\nspecs: {}"},
	} {
		doc := strings.Replace(good, bad.from, bad.to, 1)
		if doc == good {
			t.Fatalf("%q is not in the manifest", bad.from)
		}
		if _, err := decodeManifests([]byte(doc)); err == nil {
			t.Errorf("%s → %s: decoded without an error", bad.from, bad.to)
		}
	}
	if _, err := decodeManifests([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")); err == nil {
		t.Errorf("a kind the chart does not render is taken")
	}
}

// Every manifest of the chart, with its defaults and with each example
// (and with the Prometheus Operator's kinds served), decodes strictly
// into its Kubernetes type, and what it says holds together: every pod
// meets the "restricted" Pod Security standard with a read-only root
// filesystem; every selector (budgets, spreads, affinities, Services)
// picks the pods it is for; the Ingress routes to Services that exist.
func TestHelmChartManifestsAreValidKubernetes(t *testing.T) {
	runs := map[string][]string{
		"defaults":              nil,
		"defaults+operator":     {"--api-versions", "monitoring.coreos.com/v1/PrometheusRule", "--set", "metrics.serviceMonitor.enabled=true"},
		"ingress-to-full-nodes": {"--set", "ingress.enabled=true,ingress.host=vote.example.com,ingress.className=nginx,node.trustedProxies=10.0.0.0/8"},
	}
	for _, f := range examples(t) {
		runs[filepath.Base(f)] = []string{"-f", f}
	}
	for name, args := range runs {
		t.Run(name, func(t *testing.T) {
			objs := renderTyped(t, args...)
			checkObjects(t, objs)
		})
	}
}

func checkObjects(t *testing.T, objs []object) {
	t.Helper()
	services := map[string]*corev1.Service{}
	var pods []podOf
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *corev1.Service:
			services[v.Name] = v
		case *appsv1.StatefulSet:
			pods = append(pods, podOf{"StatefulSet " + v.Name, v.Spec.Selector, &v.Spec.Template})
			for _, c := range v.Spec.VolumeClaimTemplates {
				if c.Spec.Resources.Requests.Storage().IsZero() {
					t.Errorf("StatefulSet %s: volume claim %s asks for no storage", v.Name, c.Name)
				}
			}
		case *appsv1.Deployment:
			pods = append(pods, podOf{"Deployment " + v.Name, v.Spec.Selector, &v.Spec.Template})
		}
	}
	if len(pods) == 0 {
		t.Fatal("no pods rendered")
	}
	for _, p := range pods {
		checkSelects(t, p.what+" (its own selector)", p.selector, p)
		checkRestricted(t, p)
		checkScheduling(t, p)
	}
	matching := func(sel *metav1.LabelSelector) []string {
		var out []string
		for _, p := range pods {
			s, err := metav1.LabelSelectorAsSelector(sel)
			if err == nil && !s.Empty() && s.Matches(labels.Set(p.tpl.Labels)) {
				out = append(out, p.what)
			}
		}
		return out
	}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *policyv1.PodDisruptionBudget:
			if got := matching(v.Spec.Selector); len(got) != 1 {
				t.Errorf("PodDisruptionBudget %s selects %v, want one workload's pods", v.Name, got)
			}
			if v.Spec.MaxUnavailable == nil && v.Spec.MinAvailable == nil {
				t.Errorf("PodDisruptionBudget %s: neither maxUnavailable nor minAvailable", v.Name)
			}
		case *corev1.Service:
			if got := matching(&metav1.LabelSelector{MatchLabels: v.Spec.Selector}); len(got) == 0 {
				t.Errorf("Service %s selects no pods (%v)", v.Name, v.Spec.Selector)
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			found := slices.ContainsFunc(pods, func(p podOf) bool { return p.what == "Deployment "+v.Spec.ScaleTargetRef.Name })
			if !found || v.Spec.ScaleTargetRef.Kind != "Deployment" {
				t.Errorf("HorizontalPodAutoscaler %s scales %v, not a rendered Deployment", v.Name, v.Spec.ScaleTargetRef)
			}
		case *networkingv1.Ingress:
			for _, r := range v.Spec.Rules {
				for _, path := range r.HTTP.Paths {
					b := path.Backend.Service
					svc := services[b.Name]
					if svc == nil || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == b.Port.Name }) {
						t.Errorf("Ingress %s: %s%s goes to Service %s port %q, which is not rendered", v.Name, r.Host, path.Path, b.Name, b.Port.Name)
					} else if svc.Spec.ClusterIP == corev1.ClusterIPNone {
						t.Errorf("Ingress %s: %s goes to the headless Service %s", v.Name, r.Host, b.Name)
					}
				}
			}
		}
	}
	checkMonitoring(t, objs, services)
}

type podOf struct {
	what     string
	selector *metav1.LabelSelector
	tpl      *corev1.PodTemplateSpec
}

func checkSelects(t *testing.T, what string, sel *metav1.LabelSelector, p podOf) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() || !s.Matches(labels.Set(p.tpl.Labels)) {
		t.Errorf("%s: selector %v does not pick the pods %v (%v)", what, sel, p.tpl.Labels, err)
	}
}

// checkRestricted checks a pod template against the "restricted" Pod
// Security standard (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
// the baseline's controls included), and that its root filesystem is
// read-only with every path the node writes on a volume.
func checkRestricted(t *testing.T, p podOf) {
	t.Helper()
	spec := p.tpl.Spec
	fail := func(format string, args ...any) { t.Errorf("%s: "+format, append([]any{p.what}, args...)...) }
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		fail("host namespaces")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		fail("mounts a service account token it has no use for")
	}
	psc := spec.SecurityContext
	if psc == nil {
		fail("no pod securityContext")
		psc = &corev1.PodSecurityContext{}
	}
	if len(psc.Sysctls) > 0 {
		fail("sysctls %v", psc.Sysctls)
	}
	allowedVolumes := func(v corev1.Volume) bool {
		s := v.VolumeSource
		return s.ConfigMap != nil || s.CSI != nil || s.DownwardAPI != nil || s.EmptyDir != nil || s.Ephemeral != nil ||
			s.PersistentVolumeClaim != nil || s.Projected != nil || s.Secret != nil
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		if !allowedVolumes(v) {
			fail("volume %s is of a type the restricted standard refuses", v.Name)
		}
	}
	claims := map[string]bool{"data": strings.HasPrefix(p.what, "StatefulSet")} // its volumeClaimTemplates
	containers := append(slices.Clone(spec.InitContainers), spec.Containers...)
	if len(containers) == 0 {
		fail("no containers")
	}
	for _, c := range containers {
		csc := c.SecurityContext
		if csc == nil {
			fail("container %s: no securityContext", c.Name)
			continue
		}
		if csc.Privileged != nil && *csc.Privileged {
			fail("container %s is privileged", c.Name)
		}
		if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
			fail("container %s: allowPrivilegeEscalation is not false", c.Name)
		}
		if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
			fail("container %s: capabilities.drop lacks ALL", c.Name)
		} else if add := slices.DeleteFunc(slices.Clone(csc.Capabilities.Add), func(c corev1.Capability) bool { return c == "NET_BIND_SERVICE" }); len(add) > 0 {
			fail("container %s adds capabilities %v", c.Name, add)
		}
		nonRoot := csc.RunAsNonRoot
		if nonRoot == nil {
			nonRoot = psc.RunAsNonRoot
		}
		if nonRoot == nil || !*nonRoot {
			fail("container %s: runAsNonRoot is not true", c.Name)
		}
		for what, id := range map[string]*int64{"runAsUser": cmpOr(csc.RunAsUser, psc.RunAsUser), "runAsGroup": cmpOr(csc.RunAsGroup, psc.RunAsGroup)} {
			if id == nil || *id == 0 {
				fail("container %s: %s is root or unset (the image's user is 65532)", c.Name, what)
			}
		}
		seccomp := csc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
			fail("container %s: seccompProfile is not RuntimeDefault or Localhost", c.Name)
		}
		if csc.ProcMount != nil && *csc.ProcMount != corev1.DefaultProcMount {
			fail("container %s: procMount %s", c.Name, *csc.ProcMount)
		}
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				fail("container %s: hostPort %d", c.Name, port.HostPort)
			}
		}
		// Not in the standard, asked of the chart: a read-only root, and
		// a volume for every path the node writes (its data dir, /tmp).
		if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
			fail("container %s: readOnlyRootFilesystem is not true", c.Name)
		}
		writable := map[string]bool{}
		for _, m := range c.VolumeMounts {
			v, ok := volumes[m.Name]
			if !ok && !claims[m.Name] {
				fail("container %s mounts %s, which is no volume of the pod", c.Name, m.Name)
			}
			if !m.ReadOnly && (claims[m.Name] || v.EmptyDir != nil || v.PersistentVolumeClaim != nil) {
				writable[m.MountPath] = true
			}
			if v.Secret != nil && !m.ReadOnly {
				fail("container %s: the Secret %s is mounted writable", c.Name, v.Secret.SecretName)
			}
		}
		for _, a := range c.Args {
			if dir, ok := strings.CutPrefix(a, "--data-dir="); ok && !writable[dir] {
				fail("container %s: --data-dir %s is not on a writable volume (%v)", c.Name, dir, writable)
			}
		}
		if !writable["/tmp"] {
			fail("container %s: no writable /tmp beside the read-only root", c.Name)
		}
	}
}

func cmpOr(a, b *int64) *int64 {
	if a != nil {
		return a
	}
	return b
}

// checkScheduling: pods spread over zones and machines, each spread and
// anti-affinity selecting the workload's own pods (a selector that picks
// no pod spreads nothing).
func checkScheduling(t *testing.T, p podOf) {
	t.Helper()
	spec := p.tpl.Spec
	if len(spec.TopologySpreadConstraints) == 0 && (spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil) {
		t.Errorf("%s: no topology spread and no pod anti-affinity", p.what)
	}
	for _, c := range spec.TopologySpreadConstraints {
		checkSelects(t, fmt.Sprintf("%s: the spread over %s", p.what, c.TopologyKey), c.LabelSelector, p)
		if c.MaxSkew < 1 || (c.WhenUnsatisfiable != corev1.ScheduleAnyway && c.WhenUnsatisfiable != corev1.DoNotSchedule) {
			t.Errorf("%s: spread over %s: maxSkew %d, whenUnsatisfiable %q", p.what, c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable)
		}
	}
	if spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil {
		aa := spec.Affinity.PodAntiAffinity
		for _, term := range aa.RequiredDuringSchedulingIgnoredDuringExecution {
			checkSelects(t, p.what+": the required anti-affinity", term.LabelSelector, p)
		}
		for _, w := range aa.PreferredDuringSchedulingIgnoredDuringExecution {
			checkSelects(t, p.what+": the preferred anti-affinity", w.PodAffinityTerm.LabelSelector, p)
		}
	}
}

// checkMonitoring: the PrometheusRule carries files/alerts.yml's rules;
// the ServiceMonitor's targets get the job those rules watch.
func checkMonitoring(t *testing.T, objs []object, services map[string]*corev1.Service) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chart, "files", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file ruleFile
	if err := decodeStrict(b, &file); err != nil {
		t.Fatalf("files/alerts.yml: %v", err)
	}
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *prometheusRule:
			if !reflect.DeepEqual(v.Spec, file) {
				t.Errorf("PrometheusRule %s does not carry files/alerts.yml's rules", v.Metadata.Name)
			}
		case *serviceMonitor:
			// The job is the jobLabel's value on the Service it selects.
			sel, err := metav1.LabelSelectorAsSelector(&v.Spec.Selector)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, svc := range services {
				if !sel.Matches(labels.Set(svc.Labels)) {
					continue
				}
				n++
				if job := svc.Labels[v.Spec.JobLabel]; v.Spec.JobLabel == "" || job != "tally" {
					t.Errorf("ServiceMonitor %s: its targets in Service %s get job %q, not the alert rules' tally", v.Metadata.Name, svc.Name, job)
				}
				if !svc.Spec.PublishNotReadyAddresses {
					t.Errorf("Service %s: a node not ready would not be scraped (TallyNodeNotReady never fires)", svc.Name)
				}
				for _, ep := range v.Spec.Endpoints {
					if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
						t.Errorf("ServiceMonitor %s scrapes port %q, which Service %s lacks", v.Metadata.Name, ep.Port, svc.Name)
					}
				}
			}
			if n != 1 {
				t.Errorf("ServiceMonitor %s selects %d Services", v.Metadata.Name, n)
			}
		}
	}
	down := false
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert == "TallyNodeDown" {
				down = strings.Contains(r.Expr, `up{job="tally"}`)
			}
		}
	}
	if !down {
		t.Errorf(`TallyNodeDown does not watch up{job="tally"}, the job the chart's ServiceMonitor and the compose files' Prometheus give`)
	}
}

// What each run must render: the PrometheusRule when asked for or when
// the cluster serves its kind (and not otherwise), the ConfigMap of the
// rules beside it unless turned off; --public-url on every pod from
// publicUrl or the Ingress's host; an edge budget a region with edges.
func TestHelmChartRendersRulesIngressAndBudgets(t *testing.T) {
	count := func(objs []object, kind string) (n int) {
		for _, o := range objs {
			if o.kind == kind {
				n++
			}
		}
		return n
	}
	publicURLs := func(objs []object) (urls []string) {
		for _, o := range objs {
			var tpl *corev1.PodTemplateSpec
			switch v := o.obj.(type) {
			case *appsv1.StatefulSet:
				tpl = &v.Spec.Template
			case *appsv1.Deployment:
				tpl = &v.Spec.Template
			default:
				continue
			}
			u := "(none)"
			for _, a := range tpl.Spec.Containers[0].Args {
				if v, ok := strings.CutPrefix(a, "--public-url="); ok {
					u = v
				}
			}
			urls = append(urls, u)
		}
		return slices.Compact(urls)
	}

	objs := renderTyped(t)
	if count(objs, "PrometheusRule") != 0 || count(objs, "ServiceMonitor") != 0 || count(objs, "Ingress") != 0 {
		t.Errorf("defaults without the operator's kinds: a PrometheusRule, ServiceMonitor or Ingress rendered")
	}
	if got := publicURLs(objs); !slices.Equal(got, []string{"(none)"}) {
		t.Errorf("defaults: --public-url %v, want none", got)
	}
	objs = renderTyped(t, "--api-versions", "monitoring.coreos.com/v1/PrometheusRule")
	if count(objs, "PrometheusRule") != 1 || count(objs, "ConfigMap") != 2 {
		t.Errorf("the cluster serves PrometheusRule: %d rendered, %d ConfigMaps (want the rules' beside the dashboard's)", count(objs, "PrometheusRule"), count(objs, "ConfigMap"))
	}
	objs = renderTyped(t, "--api-versions", "monitoring.coreos.com/v1/PrometheusRule", "--set", "metrics.prometheusRule.enabled=false")
	if count(objs, "PrometheusRule") != 0 {
		t.Errorf("metrics.prometheusRule.enabled=false: a PrometheusRule rendered")
	}
	objs = renderTyped(t, "--set", "metrics.prometheusRule.enabled=true,metrics.alertRules=false")
	if count(objs, "PrometheusRule") != 1 || count(objs, "ConfigMap") != 1 {
		t.Errorf("metrics.prometheusRule.enabled=true, alertRules=false: %d PrometheusRules, %d ConfigMaps", count(objs, "PrometheusRule"), count(objs, "ConfigMap"))
	}

	objs = renderTyped(t, "--set", "ingress.enabled=true,ingress.host=vote.example.com,ingress.tlsSecretName=vote-tls,node.trustedProxies=10.0.0.0/8")
	if got := publicURLs(objs); !slices.Equal(got, []string{"https://vote.example.com"}) {
		t.Errorf("Ingress with TLS: --public-url %v, want https://vote.example.com on every pod", got)
	}
	objs = renderTyped(t, "--set", "ingress.enabled=true,ingress.host=vote.example.com,publicUrl=https://tv.example.com/vote/,node.trustedProxies=10.0.0.0/8")
	if got := publicURLs(objs); !slices.Equal(got, []string{"https://tv.example.com/vote"}) {
		t.Errorf("publicUrl beside the Ingress: --public-url %v", got)
	}

	public := filepath.Join(chart, "examples", "public.yaml")
	objs = renderTyped(t, "-f", public)
	if got := publicURLs(objs); !slices.Equal(got, []string{"https://vote.example.com"}) {
		t.Errorf("examples/public.yaml: --public-url %v", got)
	}
	var ing *networkingv1.Ingress
	for _, o := range objs {
		if v, ok := o.obj.(*networkingv1.Ingress); ok {
			ing = v
		}
	}
	if ing == nil || len(ing.Spec.Rules) != 2 || ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name != "t-eu-west-edge" ||
		ing.Spec.Rules[1].HTTP.Paths[0].Backend.Service.Name != "t-eu-west-http" || len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName == "" {
		t.Errorf("examples/public.yaml: want voters to the edges, the admin host to the full nodes, with TLS; got %+v", ing)
	}

	// A budget for each region's full nodes and, where it has edges, its edges.
	for _, f := range examples(t) {
		objs := renderTyped(t, "-f", f)
		if sts, deps, pdbs := count(objs, "StatefulSet"), count(objs, "Deployment"), count(objs, "PodDisruptionBudget"); pdbs != sts+deps {
			t.Errorf("%s: %d budgets for %d StatefulSets and %d Deployments", filepath.Base(f), pdbs, sts, deps)
		}
	}
}

// The DaemonSet manifest, decoded strictly into the upstream Kubernetes API types (an
// unknown or misspelt field fails), then checked against the rest of lockscope: the
// systemd unit's capabilities, the daemon's own option parser, the metrics port.
package k8s

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const manifest = "../../deploy/kubernetes/lockscoped.yaml"

type objects struct {
	ns   *corev1.Namespace
	cm   *corev1.ConfigMap
	ds   *appsv1.DaemonSet
	sa   *corev1.ServiceAccount
	role *rbacv1.ClusterRole
	bind *rbacv1.ClusterRoleBinding
}

// strict decodes @doc into @out as the API server does: field names match case-sensitively
// (encoding/json alone would take hostPid for hostPID), unknown fields and duplicate keys
// are errors.
func strict(doc []byte, out interface{}) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	errs, err := kjson.UnmarshalStrict(js, out, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

func load(t *testing.T) objects {
	raw, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var o objects
	for i, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(raw), -1) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var target interface{}
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 Namespace":
			o.ns = &corev1.Namespace{}
			target = o.ns
		case "v1 ConfigMap":
			o.cm = &corev1.ConfigMap{}
			target = o.cm
		case "apps/v1 DaemonSet":
			o.ds = &appsv1.DaemonSet{}
			target = o.ds
		case "v1 ServiceAccount":
			o.sa = &corev1.ServiceAccount{}
			target = o.sa
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			o.role = &rbacv1.ClusterRole{}
			target = o.role
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			o.bind = &rbacv1.ClusterRoleBinding{}
			target = o.bind
		default:
			t.Fatalf("document %d: unexpected %s %s", i, meta.APIVersion, meta.Kind)
		}
		if err := strict([]byte(doc), target); err != nil {
			t.Fatalf("document %d (%s): %v", i, meta.Kind, err)
		}
	}
	if o.ns == nil || o.cm == nil || o.ds == nil || o.sa == nil || o.role == nil || o.bind == nil {
		t.Fatal("want a Namespace, a ConfigMap, a DaemonSet, its ServiceAccount, ClusterRole and binding")
	}
	return o
}

// A misspelt field must fail the strict decode: the check itself works.
func TestStrictDecodeRejectsUnknownFields(t *testing.T) {
	bad := "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      hostPid: true\n"
	if err := strict([]byte(bad), &appsv1.DaemonSet{}); err == nil || !strings.Contains(err.Error(), "hostPid") {
		t.Fatalf("hostPid (for hostPID) decoded without error: %v", err)
	}
}

func TestDaemonSet(t *testing.T) {
	o := load(t)
	ds := o.ds
	pod := ds.Spec.Template.Spec
	if ds.Namespace != o.ns.Name || o.cm.Namespace != o.ns.Name {
		t.Errorf("objects not in namespace %s", o.ns.Name)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod's labels", k, v)
		}
	}
	if !pod.HostPID {
		t.Error("hostPID is off: other processes cannot be named or symbolized")
	}
	tolerated := false
	for _, tol := range pod.Tolerations {
		tolerated = tolerated || (tol.Operator == corev1.TolerationOpExists && tol.Key == "")
	}
	if !tolerated {
		t.Error("no toleration of every taint: some nodes would go unprofiled")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	checkCapabilities(t, c)
	checkMounts(t, pod, c, o.cm.Name)
	checkMetricsPort(t, ds, c)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		lim, ok := c.Resources.Limits[r]
		if !ok || lim.IsZero() {
			t.Errorf("no %s limit", r)
		}
		if req := c.Resources.Requests[r]; req.Cmp(lim) > 0 {
			t.Errorf("%s request %s above its limit %s", r, req.String(), lim.String())
		}
	}
	checkArgs(t, o, c)
}

// The capabilities added are the systemd unit's bounding set, and nothing else remains.
func checkCapabilities(t *testing.T, c corev1.Container) {
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || sc.Privileged == nil || *sc.Privileged {
		t.Fatal("want an unprivileged container with explicit capabilities")
	}
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("capabilities not dropped first: %v", sc.Capabilities.Drop)
	}
	unit, err := os.ReadFile("../../deploy/systemd/lockscoped.service.in")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CapabilityBoundingSet=(.*)$`).FindSubmatch(unit)
	if m == nil {
		t.Fatal("no CapabilityBoundingSet in the unit")
	}
	var want, have []string
	for _, cap := range strings.Fields(string(m[1])) {
		want = append(want, strings.TrimPrefix(cap, "CAP_"))
	}
	for _, cap := range sc.Capabilities.Add {
		have = append(have, string(cap))
	}
	sort.Strings(want)
	sort.Strings(have)
	if fmt.Sprint(want) != fmt.Sprint(have) {
		t.Errorf("capabilities %v, the systemd unit has %v", have, want)
	}
}

func checkMounts(t *testing.T, pod corev1.PodSpec, c corev1.Container, configMap string) {
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	mounted := map[string]string{}
	for _, m := range c.VolumeMounts {
		if _, ok := vols[m.Name]; !ok {
			t.Errorf("mount %s names no volume", m.Name)
		}
		mounted[m.MountPath] = m.Name
	}
	for path, host := range map[string]string{"/sys/kernel/btf": "/sys/kernel/btf", "/sys/kernel/tracing": "/sys/kernel/tracing",
		"/run/lockscope": "/run/lockscope"} {
		v, ok := vols[mounted[path]]
		if !ok || v.HostPath == nil || v.HostPath.Path != host {
			t.Errorf("%s is not the host's %s", path, host)
		}
	}
	if v, ok := vols[mounted["/etc/lockscope"]]; !ok || v.ConfigMap == nil || v.ConfigMap.Name != configMap {
		t.Errorf("/etc/lockscope is not ConfigMap %s", configMap)
	}
}

// The metrics port: named, scraped by the annotations, and the one the daemon listens on.
func checkMetricsPort(t *testing.T, ds *appsv1.DaemonSet, c corev1.Container) {
	var port int32
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			port = p.ContainerPort
		}
	}
	if port == 0 {
		t.Fatal("no port named metrics")
	}
	ann := ds.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != fmt.Sprint(port) {
		t.Errorf("scrape annotations %v do not name port %d", ann, port)
	}
	listen := ""
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--metrics-listen=") {
			listen = strings.TrimPrefix(a, "--metrics-listen=")
		}
	}
	if !strings.HasSuffix(listen, fmt.Sprintf(":%d", port)) {
		t.Errorf("--metrics-listen=%q is not port %d", listen, port)
	}
	for _, probe := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("a probe does not use the metrics port: %+v", probe)
		}
	}
}

// The daemon's own parser accepts the container's arguments with the ConfigMap's file
// (LOCKSCOPED names the binary; `go test` from tests/integration sets it).
func checkArgs(t *testing.T, o objects, c corev1.Container) {
	bin := os.Getenv("LOCKSCOPED")
	if bin == "" {
		t.Log("LOCKSCOPED unset: the arguments are not run through lockscoped")
		return
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "lockscoped.conf")
	if err := os.WriteFile(conf, []byte(o.cm.Data["lockscoped.conf"]), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--dump-config"}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--config=") {
			a = "--config=" + conf
		}
		args = append(args, a)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("lockscoped %v: %v\n%s", args, err, out)
	}
	if !strings.Contains(string(out), "metrics-listen = 0.0.0.0:9464") {
		t.Errorf("the daemon did not take --metrics-listen:\n%s", out)
	}
}

// Naming pods (kube-pods-url, off by default): the pod's service account may list this
// node's pods and nothing else, and the daemon is told the node's name.
func TestPodNamesAccess(t *testing.T) {
	o := load(t)
	pod := o.ds.Spec.Template.Spec
	if pod.ServiceAccountName != o.sa.Name || o.sa.Namespace != o.ns.Name {
		t.Errorf("the pod runs as %q, not the service account %s/%s", pod.ServiceAccountName, o.sa.Namespace, o.sa.Name)
	}
	if len(o.role.Rules) != 1 {
		t.Fatalf("want one rule, have %+v", o.role.Rules)
	}
	r := o.role.Rules[0]
	if fmt.Sprint(r.APIGroups) != "[]" || fmt.Sprint(r.Resources) != "[pods]" || fmt.Sprint(r.Verbs) != "[get list]" {
		t.Errorf("the rule grants more or less than get and list on pods: %+v", r)
	}
	if o.bind.RoleRef.Name != o.role.Name || o.bind.RoleRef.Kind != "ClusterRole" || len(o.bind.Subjects) != 1 ||
		o.bind.Subjects[0].Name != o.sa.Name || o.bind.Subjects[0].Namespace != o.ns.Name {
		t.Errorf("the binding does not give the role to the service account: %+v", o.bind)
	}
	c := pod.Containers[0]
	node := false
	for _, e := range c.Env {
		node = node || (e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "spec.nodeName")
	}
	arg := false
	for _, a := range c.Args {
		arg = arg || a == "--kube-node=$(NODE_NAME)"
	}
	if !node || !arg {
		t.Errorf("the node's name is not passed: env %+v args %v", c.Env, c.Args)
	}
}

// The pod lists the tests serve (tests/data) are what the API returns: they decode
// strictly into core/v1's PodList.
func TestRecordedPodLists(t *testing.T) {
	for _, f := range []string{"kubelet-pods.json", "apiserver-pods.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "data", f))
		if err != nil {
			t.Fatal(err)
		}
		var list corev1.PodList
		if err := strict(raw, &list); err != nil {
			t.Errorf("%s: %v", f, err)
		} else if len(list.Items) != 3 {
			t.Errorf("%s: %d pods, want 3", f, len(list.Items))
		}
	}
}

package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const usage = `Usage: validate [-external Kind/name,...] [-quiet] FILE... (- or none: standard input)

Checks Kubernetes objects rendered by helm template: strict decoding into the
API's Go types, the API server's checks of what the chart sets, the restricted
Pod Security Standard, and references between the objects. Exit status 1 when
anything is wrong, 2 on a usage error.

`

// object is one rendered document, decoded.
type object struct {
	source string // file:document number, for messages
	gvk    schema.GroupVersionKind
	meta   *metav1.ObjectMeta
	obj    runtime.Object
}

func (o *object) String() string { return o.gvk.Kind + "/" + o.meta.Name }

// problem is one error, with where it was found.
type problem struct {
	where string // file:doc Kind/name
	msg   string
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	external := fs.String("external", "", "objects expected in the cluster beside the release, `Kind/name,...` (Secret/db-url,ConfigMap/extra)")
	quiet := fs.Bool("quiet", false, "print only the problems and the summary")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ext, err := parseExternal(*external)
	if err != nil {
		fmt.Fprintln(stderr, "validate:", err)
		return 2
	}
	files := fs.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	var objs []*object
	var problems []problem
	for _, f := range files {
		data, err := readInput(f, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "validate:", err)
			return 2
		}
		o, p := decodeAll(f, data)
		objs = append(objs, o...)
		problems = append(problems, p...)
	}
	problems = append(problems, check(objs, ext)...)
	for _, p := range problems {
		fmt.Fprintf(stdout, "%s: %s\n", p.where, p.msg)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.gvk.Kind]++
		if !*quiet {
			fmt.Fprintf(stdout, "%s: %s (%s)\n", o.source, o, o.gvk.GroupVersion())
		}
	}
	var names []string
	for k, n := range kinds {
		names = append(names, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(names)
	fmt.Fprintf(stdout, "validate: %d objects (%s), %d problems\n", len(objs), strings.Join(names, ", "), len(problems))
	if len(problems) > 0 {
		return 1
	}
	if len(objs) == 0 {
		fmt.Fprintln(stdout, "validate: no objects: nothing was rendered")
		return 1
	}
	return 0
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// ref names an object: "Secret/db".
type ref struct{ kind, name string }

func (r ref) String() string { return r.kind + "/" + r.name }

func parseExternal(s string) (map[ref]bool, error) {
	ext := map[ref]bool{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		kind, name, ok := strings.Cut(item, "/")
		if !ok || kind == "" || name == "" {
			return nil, fmt.Errorf("-external: want Kind/name, got %q", item)
		}
		ext[ref{kind, name}] = true
	}
	return ext, nil
}

// scheme holds the kinds the validator decodes: the chart's and their
// usual neighbours.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme,
		autoscalingv2.AddToScheme, batchv1.AddToScheme, rbacv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// decodeAll splits a multi-document YAML stream and decodes each document
// strictly into its typed object.
func decodeAll(file string, data []byte) ([]*object, []problem) {
	var objs []*object
	var problems []problem
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for n := 1; ; n++ {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		where := fmt.Sprintf("%s:%d", file, n)
		if err != nil {
			problems = append(problems, problem{where, "cannot read YAML: " + err.Error()})
			break
		}
		o, errs := decode(where, doc)
		for _, e := range errs {
			problems = append(problems, problem{where + describe(o), e})
		}
		if o != nil && len(errs) == 0 {
			objs = append(objs, o)
		}
	}
	return objs, problems
}

func describe(o *object) string {
	if o == nil {
		return ""
	}
	return " " + o.String()
}

// decode decodes one document; a document of only comments is nil, nil.
func decode(where string, doc []byte) (*object, []string) {
	js, err := yaml.YAMLToJSONStrict(doc) // duplicate keys are errors
	if err != nil {
		return nil, []string{"invalid YAML: " + err.Error()}
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	var tm metav1.TypeMeta
	if err := sjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, []string{"not an object: " + err.Error()}
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, []string{"apiVersion and kind are required"}
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	obj, err := scheme.New(gvk)
	if err != nil {
		return nil, []string{fmt.Sprintf("%s %s: a kind the validator does not know (add its package to the scheme in run.go)", tm.APIVersion, tm.Kind)}
	}
	strict, err := sjson.UnmarshalStrict(js, obj, sjson.DisallowDuplicateFields, sjson.DisallowUnknownFields)
	if err != nil {
		return nil, []string{"does not decode as " + gvk.String() + ": " + err.Error()}
	}
	acc, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, []string{gvk.String() + " has no metadata"}
	}
	o := &object{source: where, gvk: gvk, meta: acc.GetObjectMeta().(*metav1.ObjectMeta), obj: obj}
	var msgs []string
	for _, e := range strict {
		msgs = append(msgs, "strict decoding: "+e.Error())
	}
	return o, msgs
}

package main

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// checker holds every rendered object, to check references between them.
type checker struct {
	objs     []*object
	byRef    map[ref]*object
	external map[ref]bool
	out      []problem
}

func check(objs []*object, external map[ref]bool) []problem {
	c := &checker{objs: objs, byRef: map[ref]*object{}, external: external}
	for _, o := range objs {
		r := ref{o.gvk.Kind, o.meta.Name}
		if prev, ok := c.byRef[r]; ok {
			c.add(o, field.Duplicate(field.NewPath("metadata", "name"), o.meta.Name).Error()+" (also "+prev.source+")")
		}
		c.byRef[r] = o
	}
	for _, o := range objs {
		c.meta(o)
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			c.deployment(o, v)
		case *corev1.Service:
			c.service(o, v)
		case *policyv1.PodDisruptionBudget:
			c.pdb(o, v)
		case *corev1.Secret:
			c.secret(o, v)
		case *corev1.ConfigMap:
			c.configMap(o, v)
		case *corev1.PersistentVolumeClaim:
			c.pvc(o, v)
		case *monitoringv1.ServiceMonitor:
			c.serviceMonitor(o, v)
		}
	}
	return c.out
}

func (c *checker) add(o *object, msg string) {
	c.out = append(c.out, problem{o.source + " " + o.String(), msg})
}

func (c *checker) addAll(o *object, errs field.ErrorList) {
	for _, e := range errs {
		c.add(o, e.Error())
	}
}

// meta checks the name, labels and annotations as the API server does.
func (c *checker) meta(o *object) {
	nameFn := apivalidation.NameIsDNSSubdomain
	if o.gvk.Kind == "Service" {
		nameFn = apivalidation.NameIsDNS1035Label
	}
	c.addAll(o, apivalidation.ValidateObjectMeta(o.meta, false, nameFn, field.NewPath("metadata")))
}

// podsSelectedBy are the pod templates of the rendered Deployments whose
// labels sel matches.
func (c *checker) podsSelectedBy(sel labels.Selector) []*corev1.PodTemplateSpec {
	var pods []*corev1.PodTemplateSpec
	for _, o := range c.objs {
		if d, ok := o.obj.(*appsv1.Deployment); ok && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			pods = append(pods, &d.Spec.Template)
		}
	}
	return pods
}

func (c *checker) deployment(o *object, d *appsv1.Deployment) {
	spec := field.NewPath("spec")
	if d.Spec.Replicas != nil && *d.Spec.Replicas < 0 {
		c.addAll(o, field.ErrorList{field.Invalid(spec.Child("replicas"), *d.Spec.Replicas, "must be at least 0")})
	}
	sel := c.selector(o, d.Spec.Selector, spec.Child("selector"))
	if sel != nil && !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		c.add(o, field.Invalid(spec.Child("template", "metadata", "labels"), d.Spec.Template.Labels, "`selector` does not match template `labels`").Error())
	}
	c.addAll(o, metavalidation.ValidateLabels(d.Spec.Template.Labels, spec.Child("template", "metadata", "labels")))
	c.addAll(o, apivalidation.ValidateAnnotations(d.Spec.Template.Annotations, spec.Child("template", "metadata", "annotations")))
	switch s := d.Spec.Strategy; s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			c.add(o, field.Forbidden(spec.Child("strategy", "rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'").Error())
		}
	case appsv1.RollingUpdateDeploymentStrategyType, "":
		if ru := s.RollingUpdate; ru != nil {
			surge := c.intOrPercent(o, ru.MaxSurge, spec.Child("strategy", "rollingUpdate", "maxSurge"))
			unavail := c.intOrPercent(o, ru.MaxUnavailable, spec.Child("strategy", "rollingUpdate", "maxUnavailable"))
			if surge == 0 && unavail == 0 && ru.MaxSurge != nil && ru.MaxUnavailable != nil {
				c.add(o, field.Invalid(spec.Child("strategy", "rollingUpdate", "maxUnavailable"), ru.MaxUnavailable.String(), "may not be 0 when `maxSurge` is 0").Error())
			}
		}
	default:
		c.add(o, field.NotSupported(spec.Child("strategy", "type"), s.Type, []string{"Recreate", "RollingUpdate"}).Error())
	}
	c.podSpec(o, &d.Spec.Template, spec.Child("template", "spec"))
}

// selector checks a label selector and returns it, or nil when it is unusable.
func (c *checker) selector(o *object, ls *metav1.LabelSelector, p *field.Path) labels.Selector {
	if ls == nil || (len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0) {
		c.add(o, field.Required(p, "an empty selector selects everything, or nothing").Error())
		return nil
	}
	errs := metavalidation.ValidateLabelSelector(ls, metavalidation.LabelSelectorValidationOptions{}, p)
	c.addAll(o, errs)
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || len(errs) > 0 {
		return nil
	}
	return sel
}

// intOrPercent checks an IntOrString count and returns its number (a percent's too).
func (c *checker) intOrPercent(o *object, v *intstr.IntOrString, p *field.Path) int {
	if v == nil {
		return -1
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			c.add(o, field.Invalid(p, v.IntVal, "must be at least 0").Error())
		}
		return int(v.IntVal)
	}
	if msgs := validation.IsValidPercent(v.StrVal); len(msgs) > 0 {
		c.add(o, field.Invalid(p, v.StrVal, strings.Join(msgs, "; ")).Error())
		return -1
	}
	var n int
	fmt.Sscanf(v.StrVal, "%d%%", &n)
	if n > 100 {
		c.add(o, field.Invalid(p, v.StrVal, "must not be greater than 100%").Error())
	}
	return n
}

// restricted evaluates pods against the restricted Pod Security Standard of
// the newest Kubernetes release the admission package knows.
var restricted = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(err)
	}
	return e
}()

var envFieldPaths = map[string]bool{
	"metadata.name": true, "metadata.namespace": true, "metadata.uid": true, "spec.nodeName": true,
	"spec.serviceAccountName": true, "status.hostIP": true, "status.hostIPs": true, "status.podIP": true, "status.podIPs": true,
}

func (c *checker) podSpec(o *object, t *corev1.PodTemplateSpec, p *field.Path) {
	spec := &t.Spec
	for _, r := range restricted.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &t.ObjectMeta, spec) {
		if !r.Allowed {
			c.add(o, fmt.Sprintf("%s: violates the restricted Pod Security Standard: %s: %s", p, r.ForbiddenReason, r.ForbiddenDetail))
		}
	}
	if spec.ServiceAccountName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.ServiceAccountName, false) {
			c.add(o, field.Invalid(p.Child("serviceAccountName"), spec.ServiceAccountName, msg).Error())
		}
		if spec.ServiceAccountName != "default" {
			c.reference(o, ref{"ServiceAccount", spec.ServiceAccountName}, "", false, p.Child("serviceAccountName"))
		}
	}
	if spec.TerminationGracePeriodSeconds != nil && *spec.TerminationGracePeriodSeconds < 0 {
		c.add(o, field.Invalid(p.Child("terminationGracePeriodSeconds"), *spec.TerminationGracePeriodSeconds, "must be at least 0").Error())
	}
	for i, s := range spec.ImagePullSecrets {
		c.reference(o, ref{"Secret", s.Name}, "", false, p.Child("imagePullSecrets").Index(i))
	}
	if psc := spec.SecurityContext; psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot && psc.RunAsUser != nil && *psc.RunAsUser == 0 {
		c.add(o, field.Invalid(p.Child("securityContext", "runAsUser"), 0, "runAsNonRoot is true: the user may not be root").Error())
	}

	volumes := map[string]bool{}
	for i, v := range spec.Volumes {
		vp := p.Child("volumes").Index(i)
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			c.add(o, field.Invalid(vp.Child("name"), v.Name, msg).Error())
		}
		if volumes[v.Name] {
			c.add(o, field.Duplicate(vp.Child("name"), v.Name).Error())
		}
		volumes[v.Name] = true
		c.volume(o, v, vp)
	}
	if len(spec.Containers) == 0 {
		c.add(o, field.Required(p.Child("containers"), "a pod needs a container").Error())
	}
	names := map[string]bool{}
	for i := range spec.Containers {
		ct := &spec.Containers[i]
		cp := p.Child("containers").Index(i)
		for _, msg := range validation.IsDNS1123Label(ct.Name) {
			c.add(o, field.Invalid(cp.Child("name"), ct.Name, msg).Error())
		}
		if names[ct.Name] {
			c.add(o, field.Duplicate(cp.Child("name"), ct.Name).Error())
		}
		names[ct.Name] = true
		c.container(o, spec, ct, volumes, cp)
	}
}

func (c *checker) volume(o *object, v corev1.Volume, p *field.Path) {
	sources := 0
	if v.EmptyDir != nil {
		sources++
	}
	if s := v.Secret; s != nil {
		sources++
		for j, it := range s.Items {
			c.reference(o, ref{"Secret", s.SecretName}, it.Key, s.Optional != nil && *s.Optional, p.Child("secret", "items").Index(j))
		}
		if len(s.Items) == 0 {
			c.reference(o, ref{"Secret", s.SecretName}, "", s.Optional != nil && *s.Optional, p.Child("secret"))
		}
	}
	if cm := v.ConfigMap; cm != nil {
		sources++
		for j, it := range cm.Items {
			c.reference(o, ref{"ConfigMap", cm.Name}, it.Key, cm.Optional != nil && *cm.Optional, p.Child("configMap", "items").Index(j))
			if it.Path == "" || path.IsAbs(it.Path) || strings.Contains(it.Path, "..") {
				c.add(o, field.Invalid(p.Child("configMap", "items").Index(j).Child("path"), it.Path, "must be a relative path without '..'").Error())
			}
		}
		if len(cm.Items) == 0 {
			c.reference(o, ref{"ConfigMap", cm.Name}, "", cm.Optional != nil && *cm.Optional, p.Child("configMap"))
		}
	}
	if pvc := v.PersistentVolumeClaim; pvc != nil {
		sources++
		c.reference(o, ref{"PersistentVolumeClaim", pvc.ClaimName}, "", false, p.Child("persistentVolumeClaim", "claimName"))
	}
	if v.Projected != nil || v.DownwardAPI != nil || v.HostPath != nil || v.CSI != nil || v.Ephemeral != nil || v.NFS != nil || v.Image != nil {
		sources++
	}
	if sources != 1 {
		c.add(o, field.Invalid(p, v.Name, fmt.Sprintf("a volume needs exactly one source, it has %d (of those the validator knows)", sources)).Error())
	}
}

func (c *checker) container(o *object, spec *corev1.PodSpec, ct *corev1.Container, volumes map[string]bool, p *field.Path) {
	if strings.TrimSpace(ct.Image) == "" {
		c.add(o, field.Required(p.Child("image"), "").Error())
	}
	switch ct.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		c.add(o, field.NotSupported(p.Child("imagePullPolicy"), ct.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}).Error())
	}
	if sc := ct.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		c.add(o, field.Required(p.Child("securityContext", "readOnlyRootFilesystem"), "the chart runs agentgate on a read-only root file system: must be true").Error())
	}
	ports := map[string]bool{}
	numbers := map[int32]bool{}
	for i, port := range ct.Ports {
		pp := p.Child("ports").Index(i)
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			c.add(o, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg).Error())
		}
		if numbers[port.ContainerPort] {
			c.add(o, field.Duplicate(pp.Child("containerPort"), port.ContainerPort).Error())
		}
		numbers[port.ContainerPort] = true
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				c.add(o, field.Invalid(pp.Child("name"), port.Name, msg).Error())
			}
			if ports[port.Name] {
				c.add(o, field.Duplicate(pp.Child("name"), port.Name).Error())
			}
			ports[port.Name] = true
		}
	}
	env := map[string]bool{}
	for i, e := range ct.Env {
		ep := p.Child("env").Index(i)
		for _, msg := range validation.IsEnvVarName(e.Name) {
			c.add(o, field.Invalid(ep.Child("name"), e.Name, msg).Error())
		}
		if env[e.Name] {
			c.add(o, field.Duplicate(ep.Child("name"), e.Name).Error()+": the last one would win")
		}
		env[e.Name] = true
		if e.ValueFrom == nil {
			continue
		}
		if e.Value != "" {
			c.add(o, field.Invalid(ep.Child("valueFrom"), "", "may not be specified when `value` is not empty").Error())
		}
		vf, vp := e.ValueFrom, ep.Child("valueFrom")
		sources := 0
		if vf.FieldRef != nil {
			sources++
			fp := vf.FieldRef.FieldPath
			if !envFieldPaths[fp] && !strings.HasPrefix(fp, "metadata.labels[") && !strings.HasPrefix(fp, "metadata.annotations[") {
				c.add(o, field.Invalid(vp.Child("fieldRef", "fieldPath"), fp, "not a field the downward API gives to env").Error())
			}
			if av := vf.FieldRef.APIVersion; av != "" && av != "v1" {
				c.add(o, field.Invalid(vp.Child("fieldRef", "apiVersion"), av, "must be v1").Error())
			}
		}
		if vf.ResourceFieldRef != nil {
			sources++
		}
		if r := vf.SecretKeyRef; r != nil {
			sources++
			c.reference(o, ref{"Secret", r.Name}, r.Key, r.Optional != nil && *r.Optional, vp.Child("secretKeyRef"))
		}
		if r := vf.ConfigMapKeyRef; r != nil {
			sources++
			c.reference(o, ref{"ConfigMap", r.Name}, r.Key, r.Optional != nil && *r.Optional, vp.Child("configMapKeyRef"))
		}
		if vf.FileKeyRef != nil {
			sources++
		}
		if sources != 1 {
			c.add(o, field.Invalid(vp, "", fmt.Sprintf("needs exactly one source, has %d", sources)).Error())
		}
	}
	for i, ef := range ct.EnvFrom {
		ep := p.Child("envFrom").Index(i)
		switch {
		case ef.SecretRef != nil && ef.ConfigMapRef == nil:
			c.reference(o, ref{"Secret", ef.SecretRef.Name}, "", ef.SecretRef.Optional != nil && *ef.SecretRef.Optional, ep.Child("secretRef"))
		case ef.ConfigMapRef != nil && ef.SecretRef == nil:
			c.reference(o, ref{"ConfigMap", ef.ConfigMapRef.Name}, "", ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional, ep.Child("configMapRef"))
		default:
			c.add(o, field.Invalid(ep, "", "needs exactly one of secretRef and configMapRef").Error())
		}
	}
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", ct.LivenessProbe}, {"readinessProbe", ct.ReadinessProbe}, {"startupProbe", ct.StartupProbe}} {
		if pr.probe != nil {
			c.probe(o, pr.name, pr.probe, ports, p.Child(pr.name))
		}
	}
	c.resources(o, ct.Resources, p.Child("resources"))
	mounts := map[string]bool{}
	for i, m := range ct.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !volumes[m.Name] {
			c.add(o, field.NotFound(mp.Child("name"), m.Name).Error()+": no volume of that name")
		}
		if !path.IsAbs(m.MountPath) {
			c.add(o, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path").Error())
		}
		if mounts[m.MountPath] {
			c.add(o, field.Duplicate(mp.Child("mountPath"), m.MountPath).Error())
		}
		mounts[m.MountPath] = true
	}
}

func (c *checker) probe(o *object, name string, pr *corev1.Probe, ports map[string]bool, p *field.Path) {
	handlers := 0
	if h := pr.HTTPGet; h != nil {
		handlers++
		c.probePort(o, h.Port, ports, p.Child("httpGet", "port"))
		if !strings.HasPrefix(h.Path, "/") {
			c.add(o, field.Invalid(p.Child("httpGet", "path"), h.Path, "must start with /").Error())
		}
		if h.Scheme != "" && h.Scheme != corev1.URISchemeHTTP && h.Scheme != corev1.URISchemeHTTPS {
			c.add(o, field.NotSupported(p.Child("httpGet", "scheme"), h.Scheme, []string{"HTTP", "HTTPS"}).Error())
		}
	}
	if t := pr.TCPSocket; t != nil {
		handlers++
		c.probePort(o, t.Port, ports, p.Child("tcpSocket", "port"))
	}
	if pr.Exec != nil {
		handlers++
	}
	if pr.GRPC != nil {
		handlers++
	}
	if handlers != 1 {
		c.add(o, field.Invalid(p, "", fmt.Sprintf("a probe needs exactly one handler, it has %d", handlers)).Error())
	}
	for _, f := range []struct {
		name string
		v    int32
		min  int32
	}{
		{"initialDelaySeconds", pr.InitialDelaySeconds, 0}, {"timeoutSeconds", pr.TimeoutSeconds, 0},
		{"periodSeconds", pr.PeriodSeconds, 0}, {"successThreshold", pr.SuccessThreshold, 0}, {"failureThreshold", pr.FailureThreshold, 0},
	} {
		if f.v < f.min {
			c.add(o, field.Invalid(p.Child(f.name), f.v, "must be at least 0").Error())
		}
	}
	if name != "readinessProbe" && pr.SuccessThreshold > 1 {
		c.add(o, field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1").Error())
	}
}

func (c *checker) probePort(o *object, port intstr.IntOrString, ports map[string]bool, p *field.Path) {
	if port.Type == intstr.Int {
		for _, msg := range validation.IsValidPortNum(int(port.IntVal)) {
			c.add(o, field.Invalid(p, port.IntVal, msg).Error())
		}
		return
	}
	if !ports[port.StrVal] {
		c.add(o, field.NotFound(p, port.StrVal).Error()+": the container has no port of that name")
	}
}

func (c *checker) resources(o *object, r corev1.ResourceRequirements, p *field.Path) {
	for name, req := range r.Requests {
		if req.Sign() < 0 {
			c.add(o, field.Invalid(p.Child("requests").Key(string(name)), req.String(), "must be at least 0").Error())
		}
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			c.add(o, field.Invalid(p.Child("requests").Key(string(name)), req.String(), "must be less than or equal to "+string(name)+" limit of "+lim.String()).Error())
		}
	}
	for name, lim := range r.Limits {
		if lim.Sign() < 0 {
			c.add(o, field.Invalid(p.Child("limits").Key(string(name)), lim.String(), "must be at least 0").Error())
		}
	}
}

// reference checks that kind/name is rendered (and has key, when one is
// named), or is declared external, or is optional.
func (c *checker) reference(o *object, r ref, key string, optional bool, p *field.Path) {
	target, ok := c.byRef[r]
	if !ok {
		if !c.external[r] && !optional {
			c.add(o, fmt.Sprintf("%s: %s is neither rendered nor declared with -external %s", p, r, r))
		}
		return
	}
	if key == "" {
		return
	}
	has := false
	switch t := target.obj.(type) {
	case *corev1.Secret:
		_, has = t.Data[key]
		if !has {
			_, has = t.StringData[key]
		}
	case *corev1.ConfigMap:
		_, has = t.Data[key]
		if !has {
			_, has = t.BinaryData[key]
		}
	}
	if !has && !optional {
		c.add(o, fmt.Sprintf("%s: %s (%s) has no key %q", p, r, target.source, key))
	}
}

func (c *checker) service(o *object, s *corev1.Service) {
	spec := field.NewPath("spec")
	switch s.Spec.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName:
	default:
		c.add(o, field.NotSupported(spec.Child("type"), s.Spec.Type, []string{"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"}).Error())
	}
	if len(s.Spec.Ports) == 0 {
		c.add(o, field.Required(spec.Child("ports"), "").Error())
	}
	c.addAll(o, metavalidation.ValidateLabels(s.Spec.Selector, spec.Child("selector")))
	var pods []*corev1.PodTemplateSpec
	if len(s.Spec.Selector) > 0 {
		pods = c.podsSelectedBy(labels.SelectorFromSet(s.Spec.Selector))
		if len(pods) == 0 && c.hasDeployments() {
			c.add(o, field.Invalid(spec.Child("selector"), s.Spec.Selector, "selects none of the rendered pods").Error())
		}
	}
	names := map[string]bool{}
	for i, port := range s.Spec.Ports {
		pp := spec.Child("ports").Index(i)
		if len(s.Spec.Ports) > 1 && port.Name == "" {
			c.add(o, field.Required(pp.Child("name"), "a Service with several ports names each").Error())
		}
		if port.Name != "" {
			for _, msg := range validation.IsDNS1123Label(port.Name) {
				c.add(o, field.Invalid(pp.Child("name"), port.Name, msg).Error())
			}
			if names[port.Name] {
				c.add(o, field.Duplicate(pp.Child("name"), port.Name).Error())
			}
			names[port.Name] = true
		}
		for _, msg := range validation.IsValidPortNum(int(port.Port)) {
			c.add(o, field.Invalid(pp.Child("port"), port.Port, msg).Error())
		}
		switch port.Protocol {
		case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			c.add(o, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{"TCP", "UDP", "SCTP"}).Error())
		}
		tp := port.TargetPort
		if tp.Type == intstr.String && tp.StrVal != "" {
			for _, msg := range validation.IsValidPortName(tp.StrVal) {
				c.add(o, field.Invalid(pp.Child("targetPort"), tp.StrVal, msg).Error())
			}
			for _, pod := range pods {
				if !podHasPort(pod, tp.StrVal) {
					c.add(o, field.Invalid(pp.Child("targetPort"), tp.StrVal, "no container of the selected pods has a port of that name").Error())
				}
			}
		} else if tp.Type == intstr.Int && tp.IntVal != 0 {
			for _, msg := range validation.IsValidPortNum(int(tp.IntVal)) {
				c.add(o, field.Invalid(pp.Child("targetPort"), tp.IntVal, msg).Error())
			}
		}
	}
}

func (c *checker) hasDeployments() bool {
	for _, o := range c.objs {
		if _, ok := o.obj.(*appsv1.Deployment); ok {
			return true
		}
	}
	return false
}

func podHasPort(pod *corev1.PodTemplateSpec, name string) bool {
	for _, ct := range pod.Spec.Containers {
		for _, p := range ct.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

func (c *checker) pdb(o *object, pdb *policyv1.PodDisruptionBudget) {
	spec := field.NewPath("spec")
	if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
		c.add(o, field.Invalid(spec, "", "needs exactly one of minAvailable and maxUnavailable").Error())
	}
	c.intOrPercent(o, pdb.Spec.MinAvailable, spec.Child("minAvailable"))
	c.intOrPercent(o, pdb.Spec.MaxUnavailable, spec.Child("maxUnavailable"))
	if sel := c.selector(o, pdb.Spec.Selector, spec.Child("selector")); sel != nil && len(c.podsSelectedBy(sel)) == 0 && c.hasDeployments() {
		c.add(o, field.Invalid(spec.Child("selector"), pdb.Spec.Selector.MatchLabels, "selects none of the rendered pods").Error())
	}
}

func (c *checker) secret(o *object, s *corev1.Secret) {
	for k := range s.Data {
		for _, msg := range validation.IsConfigMapKey(k) {
			c.add(o, field.Invalid(field.NewPath("data").Key(k), k, msg).Error())
		}
	}
	for k := range s.StringData {
		for _, msg := range validation.IsConfigMapKey(k) {
			c.add(o, field.Invalid(field.NewPath("stringData").Key(k), k, msg).Error())
		}
	}
}

func (c *checker) configMap(o *object, cm *corev1.ConfigMap) {
	for k := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(k) {
			c.add(o, field.Invalid(field.NewPath("data").Key(k), k, msg).Error())
		}
		if _, ok := cm.BinaryData[k]; ok {
			c.add(o, field.Invalid(field.NewPath("data").Key(k), k, "also in binaryData").Error())
		}
	}
}

func (c *checker) pvc(o *object, pvc *corev1.PersistentVolumeClaim) {
	spec := field.NewPath("spec")
	if len(pvc.Spec.AccessModes) == 0 {
		c.add(o, field.Required(spec.Child("accessModes"), "at least 1 access mode is required").Error())
	}
	for i, m := range pvc.Spec.AccessModes {
		switch m {
		case corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod:
		default:
			c.add(o, field.NotSupported(spec.Child("accessModes").Index(i), m, []string{"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}).Error())
		}
	}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || q.Sign() <= 0 {
		c.add(o, field.Required(spec.Child("resources", "requests", "storage"), "a positive size is required").Error())
	}
}

// promDuration is the pattern of the ServiceMonitor CRD's durations.
var promDuration = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)

func (c *checker) serviceMonitor(o *object, sm *monitoringv1.ServiceMonitor) {
	spec := field.NewPath("spec")
	sel := c.selector(o, &sm.Spec.Selector, spec.Child("selector"))
	var services []*corev1.Service
	for _, x := range c.objs {
		if s, ok := x.obj.(*corev1.Service); ok && sel != nil && sel.Matches(labels.Set(s.Labels)) {
			services = append(services, s)
		}
	}
	if sel != nil && len(services) == 0 {
		c.add(o, field.Invalid(spec.Child("selector"), sm.Spec.Selector.MatchLabels, "selects none of the rendered Services").Error())
	}
	if len(sm.Spec.Endpoints) == 0 {
		c.add(o, field.Required(spec.Child("endpoints"), "").Error())
	}
	for i, ep := range sm.Spec.Endpoints {
		p := spec.Child("endpoints").Index(i)
		for _, d := range []struct {
			name string
			v    monitoringv1.Duration
		}{{"interval", ep.Interval}, {"scrapeTimeout", ep.ScrapeTimeout}} {
			if d.v != "" && !promDuration.MatchString(string(d.v)) {
				c.add(o, field.Invalid(p.Child(d.name), d.v, "not a Prometheus duration (30s, 1m30s)").Error())
			}
		}
		if ep.Port != "" {
			for _, s := range services {
				found := false
				for _, sp := range s.Spec.Ports {
					found = found || sp.Name == ep.Port
				}
				if !found {
					c.add(o, field.Invalid(p.Child("port"), ep.Port, "Service "+s.Name+" has no port of that name").Error())
				}
			}
		} else if ep.TargetPort == nil {
			c.add(o, field.Required(p.Child("port"), "port or targetPort is required").Error())
		}
		if a := ep.Authorization; a != nil {
			if a.Type != "" && strings.EqualFold(a.Type, "basic") {
				c.add(o, field.Invalid(p.Child("authorization", "type"), a.Type, "Basic is not allowed here: use basicAuth").Error())
			}
			if a.Credentials == nil {
				c.add(o, field.Required(p.Child("authorization", "credentials"), "").Error())
			} else {
				c.reference(o, ref{"Secret", a.Credentials.Name}, a.Credentials.Key, a.Credentials.Optional != nil && *a.Credentials.Optional, p.Child("authorization", "credentials"))
			}
		}
	}
}

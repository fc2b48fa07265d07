package main

import (
	"bytes"
	"strings"
	"testing"
)

// good is a release as the chart renders it, small: every check passes.
const good = `apiVersion: v1
kind: Secret
metadata: {name: gw}
data: {api-keys: YWFhYWFhYWFhYWFhYWFhYQ==}
---
apiVersion: v1
kind: Service
metadata: {name: gw, labels: {app: gw}}
spec:
  selector: {app: gw}
  ports: [{name: http, port: 8080, targetPort: http}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: gw}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: gw}}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: gw}
spec:
  selector: {matchLabels: {app: gw}}
  endpoints:
    - port: http
      interval: 30s
      authorization: {type: Bearer, credentials: {name: gw, key: api-keys}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gw}
spec:
  replicas: 2
  selector: {matchLabels: {app: gw}}
  template:
    metadata: {labels: {app: gw}}
    spec:
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: agentgate
          image: agentgate:1
          ports: [{name: http, containerPort: 8080}]
          env:
            - name: AGENTGATE_NODE_ID
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            - name: AGENTGATE_API_KEYS
              valueFrom: {secretKeyRef: {name: gw, key: api-keys}}
          readinessProbe: {httpGet: {path: /readyz, port: http}}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
          volumeMounts: [{name: tmp, mountPath: /tmp}]
      volumes: [{name: tmp, emptyDir: {}}]
`

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		old, new string // replaced in good
		args     []string
		want     string // in the output; "" = passes
	}{
		{name: "good"},
		{name: "unknown field", old: "      containers:", new: "      containerz: []\n      containers:",
			want: `unknown field "spec.template.spec.containerz"`},
		{name: "field of the wrong case", old: "containerPort: 8080", new: "containerport: 8080",
			want: `unknown field "spec.template.spec.containers[0].ports[0].containerport"`},
		{name: "duplicate key", old: "  replicas: 2", new: "  replicas: 2\n  replicas: 3",
			want: `key "replicas" already set in map`},
		{name: "mistyped value", old: "replicas: 2", new: `replicas: "2"`,
			want: `does not decode as apps/v1, Kind=Deployment`},
		{name: "unknown kind", old: "kind: PodDisruptionBudget", new: "kind: PodDisruptionBudgett",
			want: `a kind the validator does not know`},
		{name: "invalid name", old: "metadata: {name: gw, labels", new: "metadata: {name: 1gw, labels",
			want: `Service/1gw: metadata.name: Invalid value: "1gw"`},
		{name: "selector does not match the template", old: "    metadata: {labels: {app: gw}}", new: "    metadata: {labels: {app: other}}",
			want: "`selector` does not match template `labels`"},
		{name: "a Secret key that is not there", old: "key: api-keys}}\n          readinessProbe", new: "key: apikeys}}\n          readinessProbe",
			want: `Secret/gw (-:1) has no key "apikeys"`},
		{name: "a Secret that is not rendered", old: "{secretKeyRef: {name: gw,", new: "{secretKeyRef: {name: db,",
			want: `Secret/db is neither rendered nor declared with -external Secret/db`},
		{name: "a Secret declared external", old: "{secretKeyRef: {name: gw,", new: "{secretKeyRef: {name: db,",
			args: []string{"-external", "Secret/db"}},
		{name: "probe on a port the container lacks", old: "path: /readyz, port: http", new: "path: /readyz, port: metrics",
			want: `readinessProbe.httpGet.port: Not found: "metrics"`},
		{name: "Service targetPort the pods lack", old: "targetPort: http", new: "targetPort: api",
			want: `no container of the selected pods has a port of that name`},
		{name: "ServiceMonitor port the Service lacks", old: "    - port: http\n", new: "    - port: metrics\n",
			want: `Service gw has no port of that name`},
		{name: "restricted Pod Security Standard", old: "allowPrivilegeEscalation: false", new: "allowPrivilegeEscalation: true",
			want: `violates the restricted Pod Security Standard: allowPrivilegeEscalation != false`},
		{name: "writable root file system", old: "readOnlyRootFilesystem: true", new: "readOnlyRootFilesystem: false",
			want: `readOnlyRootFilesystem: Required value`},
		{name: "mount of a missing volume", old: "{name: tmp, mountPath", new: "{name: scratch, mountPath",
			want: `volumeMounts[0].name: Not found: "scratch"`},
		{name: "downward API field env cannot have", old: "fieldPath: metadata.name", new: "fieldPath: metadata.generation",
			want: `not a field the downward API gives to env`},
		{name: "PDB with both bounds", old: "  maxUnavailable: 1", new: "  maxUnavailable: 1\n  minAvailable: 1",
			want: `needs exactly one of minAvailable and maxUnavailable`},
		{name: "bad duration", old: "interval: 30s", new: "interval: 30 seconds",
			want: `not a Prometheus duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := good
			if tt.old != "" {
				if !strings.Contains(in, tt.old) {
					t.Fatalf("the test's old text %q is not in the manifest", tt.old)
				}
				in = strings.Replace(in, tt.old, tt.new, 1)
			}
			var out, errOut bytes.Buffer
			code := run(append(tt.args, "-quiet"), strings.NewReader(in), &out, &errOut)
			if tt.want == "" {
				if code != 0 {
					t.Fatalf("exit %d, want 0:\n%s%s", code, out.String(), errOut.String())
				}
				return
			}
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output does not say %q:\n%s%s", tt.want, out.String(), errOut.String())
			}
		})
	}
}

func TestNothingRendered(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := run([]string{"-quiet"}, strings.NewReader("# only a comment\n---\n"), &out, &out); code != 1 {
		t.Errorf("exit %d for no objects, want 1:\n%s", code, out.String())
	}
}

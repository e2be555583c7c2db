// Validates rendered manifests (YAML streams, one file per argument) offline: every
// object against its published schema: Kubernetes' own (kubernetes-models), the
// Prometheus Operator's (ServiceMonitor), the Gateway API's (HTTPRoute). No package
// ships the Inference Extension's InferencePool: its v1 CRD's required fields and
// their types are checked here. An apiVersion/kind with no schema is an error.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const modules = {
  "v1": "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "autoscaling/v2": "kubernetes-models/autoscaling/v2",
  "policy/v1": "kubernetes-models/policy/v1",
  "networking.k8s.io/v1": "kubernetes-models/networking.k8s.io/v1",
  "rbac.authorization.k8s.io/v1": "kubernetes-models/rbac.authorization.k8s.io/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
  "gateway.networking.k8s.io/v1": "@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1",
};

// inference.networking.k8s.io/v1 InferencePool: the CRD's required fields and types.
function checkInferencePool(o) {
  const errors = [];
  const spec = o.spec ?? {};
  const port = (p) => Number.isInteger(p) && p >= 1 && p <= 65535;
  const labels = spec.selector?.matchLabels;
  if (!labels || typeof labels !== "object" || Object.keys(labels).length === 0) {
    errors.push("spec.selector.matchLabels is required (a map of labels)");
  } else {
    for (const [k, v] of Object.entries(labels)) {
      if (typeof v !== "string" || !/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(v) || v.length > 63) {
        errors.push(`spec.selector.matchLabels.${k}: not a label value`);
      }
    }
  }
  if (!Array.isArray(spec.targetPorts) || spec.targetPorts.length !== 1 || !port(spec.targetPorts[0]?.number)) {
    errors.push("spec.targetPorts must hold exactly one {number: 1..65535}");
  }
  const ref = spec.endpointPickerRef;
  if (!ref || typeof ref.name !== "string" || ref.name.length === 0) errors.push("spec.endpointPickerRef.name is required");
  if (ref?.port !== undefined && !port(ref.port?.number)) errors.push("spec.endpointPickerRef.port.number: 1..65535");
  if (ref?.failureMode !== undefined && !["FailOpen", "FailClose"].includes(ref.failureMode)) {
    errors.push("spec.endpointPickerRef.failureMode: FailOpen or FailClose");
  }
  if (ref?.kind !== undefined && ref.kind !== "Service") errors.push("spec.endpointPickerRef.kind: Service");
  return errors;
}

let failures = 0, count = 0;
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    const o = doc.toJS();
    if (!o) continue;
    ++count;
    const name = `${file}: ${o.kind}/${o.metadata?.name}`;
    let errors = [];
    if (o.apiVersion === "inference.networking.k8s.io/v1" && o.kind === "InferencePool") {
      errors = checkInferencePool(o);
    } else if (!modules[o.apiVersion]) {
      errors = [`no schema for apiVersion ${o.apiVersion}`];
    } else {
      const Model = (await import(modules[o.apiVersion]))[o.kind];
      if (!Model) {
        errors = [`no kind ${o.kind} in ${o.apiVersion}`];
      } else {
        try {
          new Model(o).validate();
        } catch (e) {
          errors = [e.message];
        }
      }
    }
    for (const e of errors) console.log(`FAIL ${name}: ${e}`);
    failures += errors.length > 0;
  }
}
console.log(`${count - failures} of ${count} objects valid`);
process.exit(failures > 0 || count === 0 ? 1 : 0);

"""Kubernetes manifests held to their owners' own published models, strictly.

Each object is walked against the model its owner publishes on PyPI:

- trainer.kubeflow.org/v1alpha1 (TrainJob, TrainingRuntime, ClusterTrainingRuntime):
  kubeflow-trainer-api's pydantic models (``kubeflow_trainer_api.models``), which carry
  their own copies of the core types (IoK8sApiCoreV1PodSpec, ...). Their ``from_dict``
  reads the keys it knows and drops the rest, so the walk here does the refusing: every
  key must be a field's JSON name (its alias), every required field present, and every
  leaf is validated by pydantic itself (``validate_assignment``, strict), so the
  models' own enum validators and Strict types apply.
- kubeflow.org/v1 (PyTorchJob): the Training Operator SDK's openapi-generator models
  (``kubeflow.training.models``), and core objects (v1 Secret, PersistentVolumeClaim,
  ...): the Kubernetes client's (``kubernetes.client.models``). Both deserialize by
  ``attribute_map`` and drop unknown keys silently; the walk follows ``openapi_types``
  (``list[X]``, ``dict(str, X)``, primitives, nested classes), refuses unknown keys,
  checks primitive types exactly (no ``"3"`` for an int), and finds required fields
  by the models' own client-side validation (the setter that refuses None).

On top, the rules the API server and the owners' admission webhooks apply that no model
carries: object names (DNS-1123 subdomain; RFC 1035 label for Service, TrainJob,
PyTorchJob), label and annotation keys, resource names and quantities, container,
volume and port names, volume mounts that name a volume, Secret keys and data.

Every failure is an AssertionError naming the kind and the field's path, e.g.
``TrainJob spec.trainer.resourcesPerNode: unknown key 'foo'``.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import json
import re
import subprocess
import types
import typing
from decimal import Decimal
from functools import cache
from typing import Any

import yaml

from tests.conftest import real_tool

TRAINER = "trainer.kubeflow.org/v1alpha1"

_MODELS: dict[tuple[str, str], tuple[str, str]] = {
    # (apiVersion, kind): (module, class)
    (TRAINER, "TrainJob"): ("kubeflow_trainer_api.models", "TrainerV1alpha1TrainJob"),
    (TRAINER, "TrainingRuntime"): ("kubeflow_trainer_api.models", "TrainerV1alpha1TrainingRuntime"),
    (TRAINER, "ClusterTrainingRuntime"): (
        "kubeflow_trainer_api.models",
        "TrainerV1alpha1ClusterTrainingRuntime",
    ),
    ("kubeflow.org/v1", "PyTorchJob"): ("kubeflow.training.models", "KubeflowOrgV1PyTorchJob"),
    ("v1", "Secret"): ("kubernetes.client.models", "V1Secret"),
    ("v1", "ConfigMap"): ("kubernetes.client.models", "V1ConfigMap"),
    ("v1", "PersistentVolumeClaim"): ("kubernetes.client.models", "V1PersistentVolumeClaim"),
    ("v1", "Service"): ("kubernetes.client.models", "V1Service"),
    ("v1", "ServiceAccount"): ("kubernetes.client.models", "V1ServiceAccount"),
    ("v1", "Pod"): ("kubernetes.client.models", "V1Pod"),
    ("batch/v1", "Job"): ("kubernetes.client.models", "V1Job"),
}
"""Every kind the harness knows; anything else is refused, not waved through."""

# Names the API server (apimachinery/pkg/util/validation) and the owners' webhooks check.
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_IANA_SVC = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")

_RFC1035_KINDS = {"Service", "TrainJob", "PyTorchJob"}
"""Kinds whose metadata.name must be an RFC 1035 label: Service (core validation),
TrainJob (its CRD's CEL rule, trainjob_types.go), PyTorchJob (the operator's webhook)."""

_STANDARD_RESOURCES = {"cpu", "memory", "ephemeral-storage", "storage", "pods"}

# Fields the Kubernetes client types loosely (quantities as str, IntOrString as object).
_CLASSIC_OVERRIDES: dict[tuple[str, str], str] = {
    ("V1ResourceRequirements", "limits"): "dict(str, Quantity)",
    ("V1ResourceRequirements", "requests"): "dict(str, Quantity)",
    ("V1VolumeResourceRequirements", "limits"): "dict(str, Quantity)",
    ("V1VolumeResourceRequirements", "requests"): "dict(str, Quantity)",
    ("V1EmptyDirVolumeSource", "size_limit"): "Quantity",
    ("V1PodSpec", "overhead"): "dict(str, Quantity)",
    ("V1ServicePort", "target_port"): "IntOrString",
    ("V1HTTPGetAction", "port"): "IntOrString",
    ("V1TCPSocketAction", "port"): "IntOrString",
}
# Class names the Training Operator SDK's openapi_types use but does not define.
_CLASSIC_ALIASES = {"K8sIoApiAutoscalingV2MetricSpec": "V2MetricSpec"}

_CONCEPT_PREFIXES = (
    "IoK8sApimachineryPkgApisMetaV1",
    "IoK8sApimachineryPkgApiResource",
    "IoK8sApimachineryPkgUtilIntstr",
    "IoK8sApiCoreV1",
    "IoK8sApiBatchV1",
    "TrainerV1alpha1",
    "JobsetV1alpha2",
    "KubeflowOrgV1",
    "V1",
)


def check(obj: Any) -> None:
    """obj, one manifest as kubectl would send it, is what its owner's model accepts."""
    if not isinstance(obj, dict):
        raise AssertionError(f"a manifest must be a mapping, not {type(obj).__name__}")
    api, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        raise AssertionError(f"manifest without apiVersion/kind strings: {sorted(obj)}")
    if (api, kind) not in _MODELS:
        raise AssertionError(f"{kind}: no model known for apiVersion {api!r} kind {kind!r}")
    module, name = _MODELS[api, kind]
    model = getattr(__import__(module, fromlist=[name]), name)
    walk = _Walk(kind)
    if module == "kubeflow_trainer_api.models":
        walk.pydantic(model, obj, "")
    else:
        walk.classic_model(model, obj, "")
    _object_rules(kind, obj, walk)


def check_yaml(text: str) -> list[dict[str, Any]]:
    """The documents of text as kubectl reads them, each checked; refuses duplicate keys,
    non-mapping documents and documents without apiVersion, kind or metadata.name."""
    try:
        documents = list(yaml.load_all(text, Loader=_StrictLoader))
    except yaml.YAMLError as exc:
        raise AssertionError(f"YAML kubectl would refuse: {exc}") from None
    objects: list[dict[str, Any]] = []
    for index, doc in enumerate(documents):
        if doc is None:  # an empty document, as after a trailing `---`: kubectl skips it
            continue
        where = f"document {index}"
        if not isinstance(doc, dict):
            raise AssertionError(f"{where}: not a mapping but {type(doc).__name__}")
        for key in ("apiVersion", "kind"):
            if not isinstance(doc.get(key), str) or not doc[key]:
                raise AssertionError(f"{where}: no {key}")
        meta = doc.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise AssertionError(f"{where} ({doc['kind']}): no metadata.name")
        check(doc)
        objects.append(doc)
    if not objects:
        raise AssertionError("no Kubernetes object in the YAML")
    read = kubectl_reads(text)
    for index, (ours, theirs) in enumerate(zip(objects, read, strict=True)):
        if ours != theirs:
            raise AssertionError(
                f"object {index} ({ours['kind']} {ours['metadata']['name']}): kubectl reads "
                f"{_first_difference(ours, theirs)}"
            )
    return objects


READBACK = "builder-readback"
"""The label kubectl adds to every object it reads back (then taken off again)."""


def kubectl_reads(text: str) -> list[dict[str, Any]]:
    """The objects of text as kubectl's own YAML reader gets them (sigs.k8s.io/yaml over
    go-yaml, YAML 1.1: plain `y` a boolean, `1e-4` a float), with no cluster:
    `kubectl label --local -f - KEY=1 -o json` prints each object it read."""
    result = subprocess.run(
        [real_tool("kubectl"), "label", "--local", "-f", "-", f"{READBACK}=1", "-o", "json"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"kubectl does not read the YAML: {result.stderr.strip()}")
    decoder, out, at = json.JSONDecoder(), [], 0
    body = result.stdout
    while body[at:].strip():
        at += len(body[at:]) - len(body[at:].lstrip())
        obj, at = decoder.raw_decode(body, at)
        labels = obj["metadata"]["labels"]
        del labels[READBACK]
        if not labels:  # an object that had none
            del obj["metadata"]["labels"]
        out.append(obj)
    return out


def _first_difference(ours: Any, theirs: Any, path: str = "") -> str:
    """Where two read-backs part, for the message: `path: 'y' (builder) but True`."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(ours.keys() | theirs.keys()):
            if ours.get(key) != theirs.get(key):
                return _first_difference(ours.get(key), theirs.get(key), f"{path}.{key}")
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{index}]")
    return f"{path or '.'}: {ours!r} (as builder wrote it) as {theirs!r}"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last
    silently; the API server's strict decoding reports it)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _concept(class_name: str) -> str:
    for prefix in _CONCEPT_PREFIXES:
        if class_name.startswith(prefix):
            return class_name[len(prefix) :]
    return class_name


class _Walk:
    """One object's walk: kind names it in every failure."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def fail(self, path: str, message: str) -> typing.NoReturn:
        raise AssertionError(f"{self.kind} {path or '(top)'}: {message}")

    def mapping(self, value: Any, path: str, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(path, f"expected {what} (a mapping), got {type(value).__name__} {value!r}")
        for key in value:
            if not isinstance(key, str):
                self.fail(path, f"key {key!r} is {type(key).__name__}, not a string")
        return value

    def unknown(self, path: str, key: str, known: typing.Iterable[str]) -> typing.NoReturn:
        close = difflib.get_close_matches(key, list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        self.fail(path, f"unknown key {key!r}{hint}")

    # kubeflow-trainer-api: pydantic v2 models

    def pydantic(self, ann: Any, value: Any, path: str) -> None:
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        if origin in (typing.Union, types.UnionType):
            rest = [a for a in args if a is not type(None)]
            if value is None and len(rest) < len(args):
                pass  # Optional: null is absent
            elif len(rest) == 1:
                self.pydantic(rest[0], value, path)
            else:
                self.leaf(ann, value, path)
        elif origin is list:
            if not isinstance(value, list):
                self.fail(path, f"expected a list, got {type(value).__name__} {value!r}")
            for i, item in enumerate(value):
                self.pydantic(args[0], item, f"{path}[{i}]")
        elif origin is dict:
            for key, item in self.mapping(value, path, "a map").items():
                self.pydantic(args[1], item, f"{path}[{key}]")
        elif _is_pydantic_model(ann):
            self.pydantic_model(ann, value, path)
        else:
            self.leaf(ann, value, path)

    def pydantic_model(self, cls: Any, value: Any, path: str) -> None:
        if "actual_instance" in cls.model_fields:  # a oneOf (Quantity, IntOrString)
            try:
                cls.from_json(json.dumps(value))
            except ValueError:
                self.fail(
                    path,
                    f"{value!r} is none of {sorted(cls.model_fields['one_of_schemas'].default)}",
                )
            self.rules(_concept(cls.__name__), value, path)
            return
        value = self.mapping(value, path, cls.__name__)
        fields = _pydantic_fields(cls)
        for key in value:
            if key not in fields:
                self.unknown(path, key, fields)
        for key, (_, info) in fields.items():
            if info.is_required() and key not in value:
                self.fail(_join(path, key), "required field missing")
        probe = cls.model_construct()
        for key, item in value.items():
            name, info = fields[key]
            sub = _join(path, key)
            if _holds_model(info.annotation):
                self.pydantic(info.annotation, item, sub)
                continue
            try:  # the model's own field validators and strict types
                cls.__pydantic_validator__.validate_assignment(probe, name, item, strict=True)
            except Exception as exc:  # pydantic.ValidationError
                self.fail(sub, _pydantic_message(exc, item, skip=1))
        self.rules(_concept(cls.__name__), value, path)

    def leaf(self, ann: Any, value: Any, path: str) -> None:
        try:
            _adapter(ann).validate_python(value, strict=True)
        except Exception as exc:  # pydantic.ValidationError
            self.fail(path, _pydantic_message(exc, value))

    # kubeflow-training and kubernetes: classic openapi-generator models

    def classic(self, kind: str, value: Any, path: str) -> None:
        if value is None:
            return
        if kind.startswith("list["):
            if not isinstance(value, list):
                self.fail(path, f"expected a list, got {type(value).__name__} {value!r}")
            for i, item in enumerate(value):
                self.classic(kind[5:-1], item, f"{path}[{i}]")
            return
        if kind.startswith("dict("):
            inner = kind[5:-1].split(", ", 1)[1]
            for key, item in self.mapping(value, path, "a map").items():
                self.classic(inner, item, f"{path}[{key}]")
            return
        if kind in _PRIMITIVES:
            if not _PRIMITIVES[kind](value):
                self.fail(path, f"expected {kind}, got {type(value).__name__} {value!r}")
            if kind == "Quantity":
                self.rules("Quantity", value, path)
            return
        if kind == "object":  # typed as anything by the model: nothing deeper to check
            return
        self.classic_model(_classic_class(kind), value, path)

    def classic_model(self, cls: Any, value: Any, path: str) -> None:
        value = self.mapping(value, path, cls.__name__)
        json_to_attr = {j: a for a, j in cls.attribute_map.items()}
        for key in value:
            if key not in json_to_attr:
                self.unknown(path, key, json_to_attr)
        required = _classic_required(cls)
        for attr in sorted(required):
            key = cls.attribute_map[attr]
            if value.get(key) is None:
                self.fail(_join(path, key), "required field missing")
        probe = _classic_probe(cls)
        for key, item in value.items():
            attr = json_to_attr[key]
            kind = _CLASSIC_OVERRIDES.get((cls.__name__, attr), cls.openapi_types[attr])
            sub = _join(path, key)
            self.classic(kind, item, sub)
            if kind in ("str", "int", "bool", "float", "list[str]"):
                try:  # the model's own client-side validation (required, enums if any)
                    setattr(probe, attr, item)
                except ValueError as exc:
                    self.fail(sub, str(exc))
                twin = _pydantic_twin(cls.__name__)
                if twin is not None and attr in twin.model_fields:
                    try:  # the enums the Kubernetes client does not carry, from the twin
                        twin.__pydantic_validator__.validate_assignment(
                            twin.model_construct(), attr, item, strict=True
                        )
                    except Exception as exc:  # pydantic.ValidationError
                        self.fail(sub, _pydantic_message(exc, item, skip=1))
        self.rules(_concept(cls.__name__), value, path)

    # what the API server checks beyond the models

    def rules(self, concept: str, value: Any, path: str) -> None:
        check_rule = getattr(self, f"rule_{concept}", None)
        if check_rule is not None:
            check_rule(value, path)

    def name(self, value: Any, path: str, pattern: re.Pattern[str], what: str) -> None:
        if not isinstance(value, str) or len(value) > 63 or not pattern.fullmatch(value):
            self.fail(path, f"{value!r} is not {what}")

    def subdomain(self, value: Any, path: str) -> None:
        ok = isinstance(value, str) and 0 < len(value) <= 253
        if not ok or not all(_LABEL.fullmatch(part) for part in value.split(".")):
            self.fail(path, f"{value!r} is not a DNS-1123 subdomain")

    def qualified(self, key: str, path: str, what: str) -> None:
        prefix, _, name = key.rpartition("/")
        if "/" in key and (not prefix or len(prefix) > 253):
            self.fail(path, f"{what} {key!r} is not a qualified name (bad prefix)")
        if prefix and not all(_LABEL.fullmatch(p) for p in prefix.split(".")):
            self.fail(path, f"{what} {key!r} is not a qualified name (prefix not a DNS subdomain)")
        if len(name) > 63 or not _NAME_PART.fullmatch(name):
            self.fail(path, f"{what} {key!r} is not a qualified name")

    def rule_ObjectMeta(self, meta: dict[str, Any], path: str) -> None:
        if "name" in meta:
            self.subdomain(meta["name"], _join(path, "name"))
        if "namespace" in meta:
            self.name(meta["namespace"], _join(path, "namespace"), _LABEL, "a DNS-1123 label")
        for key, val in (meta.get("labels") or {}).items():
            sub = f"{_join(path, 'labels')}[{key}]"
            self.qualified(key, sub, "label key")
            if not isinstance(val, str) or (
                val and (len(val) > 63 or not _NAME_PART.fullmatch(val))
            ):
                self.fail(sub, f"label value {val!r} is not a valid label value")
        for key in meta.get("annotations") or {}:
            self.qualified(key, f"{_join(path, 'annotations')}[{key}]", "annotation key")

    def rule_Quantity(self, value: Any, path: str) -> None:
        _quantity(self, value, path)

    def rule_ResourceRequirements(self, spec: dict[str, Any], path: str) -> None:
        limits, requests = spec.get("limits") or {}, spec.get("requests") or {}
        for field, values in (("limits", limits), ("requests", requests)):
            for name, qty in values.items():
                sub = f"{_join(path, field)}[{name}]"
                self.qualified(name, sub, "resource name")
                if (
                    "/" not in name
                    and name not in _STANDARD_RESOURCES
                    and not name.startswith("hugepages-")
                ):
                    self.fail(sub, f"{name!r} is not a standard resource name (prefix it)")
                amount = _quantity(self, qty, sub)
                extended = "/" in name and not name.startswith("kubernetes.io/")
                if extended and amount != amount.to_integral_value():
                    self.fail(sub, f"extended resource {name} must be a whole number, not {qty!r}")
        for name, qty in requests.items():
            sub = f"{_join(path, 'requests')}[{name}]"
            extended = "/" in name and not name.startswith("kubernetes.io/")
            if extended and name not in limits:
                self.fail(sub, f"extended resource {name} requested without a limit")
            if name in limits:
                req, lim = _quantity(self, qty, sub), _quantity(self, limits[name], sub)
                if extended and req != lim:
                    self.fail(
                        sub, f"extended resource {name}: request must equal limit {limits[name]!r}"
                    )
                if req > lim:
                    self.fail(sub, f"{qty!r} is more than the limit {limits[name]!r}")

    rule_VolumeResourceRequirements = rule_ResourceRequirements

    def rule_Container(self, container: dict[str, Any], path: str) -> None:
        self.name(container.get("name"), _join(path, "name"), _LABEL, "a DNS-1123 label")
        mounts = [m.get("mountPath") for m in container.get("volumeMounts") or []]
        if len(mounts) != len(set(mounts)):
            self.fail(_join(path, "volumeMounts"), f"mount paths repeated: {mounts}")

    def rule_ContainerPort(self, port: dict[str, Any], path: str) -> None:
        if not 0 < port.get("containerPort", 0) < 65536:
            self.fail(_join(path, "containerPort"), "must be between 1 and 65535")
        if "name" in port:
            name = port["name"]
            ok = len(name) <= 15 and _IANA_SVC.fullmatch(name) and "--" not in name
            if not ok or not re.search("[a-z]", name):
                self.fail(_join(path, "name"), f"{name!r} is not an IANA service name")

    def rule_Volume(self, volume: dict[str, Any], path: str) -> None:
        self.name(volume.get("name"), _join(path, "name"), _LABEL, "a DNS-1123 label")

    def rule_EnvVar(self, env: dict[str, Any], path: str) -> None:
        name = env.get("name", "")
        if not name or "=" in name or not all(" " <= c <= "~" for c in name):
            self.fail(_join(path, "name"), f"{name!r} is not an environment variable name")

    def rule_PodSpec(self, spec: dict[str, Any], path: str) -> None:
        volumes = [v.get("name") for v in spec.get("volumes") or []]
        if len(volumes) != len(set(volumes)):
            self.fail(_join(path, "volumes"), f"volume names repeated: {volumes}")
        names: list[str] = []
        for field in ("initContainers", "containers"):
            for i, container in enumerate(spec.get(field) or []):
                names.append(container.get("name"))
                for j, mount in enumerate(container.get("volumeMounts") or []):
                    if mount.get("name") not in volumes:
                        where = f"{_join(path, field)}[{i}].volumeMounts[{j}].name"
                        self.fail(where, f"{mount.get('name')!r} names no volume of the pod")
        if len(names) != len(set(names)):
            self.fail(_join(path, "containers"), f"container names repeated: {names}")


def _quantity(walk: _Walk, value: Any, path: str) -> Decimal:
    from kubernetes.utils import parse_quantity

    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        walk.fail(path, f"quantity {value!r} is neither a string nor a number")
    try:
        return Decimal(parse_quantity(value))
    except (ValueError, ArithmeticError):
        walk.fail(path, f"{value!r} is not a Kubernetes quantity")


def _object_rules(kind: str, obj: dict[str, Any], walk: _Walk) -> None:
    """The checks on a whole object: its name, and its owner's admission rules."""
    name = (obj.get("metadata") or {}).get("name")
    if name is None:
        walk.fail("metadata.name", "required (kubectl apply needs a name)")
    if kind in _RFC1035_KINDS:
        walk.name(name, "metadata.name", _DNS1035, "an RFC 1035 label (a-z first, at most 63)")
    if kind in ("Secret", "ConfigMap"):
        for field in ("data", "stringData", "binaryData"):
            for key, val in (obj.get(field) or {}).items():
                sub = f"{field}[{key}]"
                if len(key) > 253 or not _CONFIG_KEY.fullmatch(key):
                    walk.fail(sub, f"{key!r} is not a valid {kind} key")
                if (kind, field) in (("Secret", "data"), ("ConfigMap", "binaryData")):
                    try:
                        base64.b64decode(val, validate=True)
                    except (binascii.Error, ValueError):
                        walk.fail(sub, "data values must be base64")
    if kind == "PyTorchJob":
        _pytorchjob_webhook(obj, walk)


def _pytorchjob_webhook(obj: dict[str, Any], walk: _Walk) -> None:
    """validatePyTorchReplicaSpecs of the Training Operator's webhook (v1.9.0,
    pkg/webhooks/pytorch/pytorchjob_webhook.go)."""
    specs = (obj.get("spec") or {}).get("pytorchReplicaSpecs")
    if not specs:
        walk.fail("spec.pytorchReplicaSpecs", "must be required")
    for role, spec in specs.items():
        path = f"spec.pytorchReplicaSpecs[{role}]"
        if role not in ("Master", "Worker"):
            walk.fail(path, "replica type must be Master or Worker")
        containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            walk.fail(f"{path}.template.spec.containers", "must be specified")
        for i, container in enumerate(containers):
            if not container.get("image"):
                walk.fail(f"{path}.template.spec.containers[{i}].image", "must be required")
        if not any(c.get("name") == "pytorch" for c in containers):
            walk.fail(f"{path}.template.spec.containers", "must have a container named pytorch")
        replicas = spec.get("replicas")
        if role == "Master" and replicas != 1:
            walk.fail(f"{path}.replicas", "must be 1")
        if role == "Worker" and replicas is not None and replicas < 1:
            walk.fail(f"{path}.replicas", "must be at least 1")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_PRIMITIVES: dict[str, typing.Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": _is_int,
    "bool": lambda v: isinstance(v, bool),
    "float": lambda v: _is_int(v) or isinstance(v, float),
    "date": lambda v: isinstance(v, str),
    "datetime": lambda v: isinstance(v, str),
    "Quantity": lambda v: isinstance(v, str) or _is_int(v) or isinstance(v, float),
    "IntOrString": lambda v: isinstance(v, str) or _is_int(v),
}


@cache
def _classic_class(name: str) -> Any:
    import kubeflow.training.models
    import kubernetes.client.models

    name = _CLASSIC_ALIASES.get(name, name)
    for module in (kubeflow.training.models, kubernetes.client.models):
        if hasattr(module, name):
            return getattr(module, name)
    raise AssertionError(f"the model names a type {name!r} that neither package defines")


@cache
def _classic_required(cls: Any) -> frozenset[str]:
    """The attributes whose setter refuses None under client-side validation."""
    probe = _classic_probe(cls)
    required = set()
    for attr in cls.openapi_types:
        try:
            setattr(probe, attr, None)
        except ValueError:
            required.add(attr)
    return frozenset(required)


def _classic_probe(cls: Any) -> Any:
    probe = cls.__new__(cls)
    probe.local_vars_configuration = types.SimpleNamespace(client_side_validation=True)
    probe.discriminator = None
    return probe


@cache
def _pydantic_twin(class_name: str) -> Any:
    """kubeflow-trainer-api's copy of a core Kubernetes type (V1Container ->
    IoK8sApiCoreV1Container): it carries the API's enums as validators, the Kubernetes
    client's models none."""
    import kubeflow_trainer_api.models

    if not class_name.startswith("V1"):
        return None
    return getattr(kubeflow_trainer_api.models, f"IoK8sApiCoreV1{class_name[2:]}", None)


def _is_pydantic_model(ann: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(ann, type) and issubclass(ann, BaseModel)


def _holds_model(ann: Any) -> bool:
    return _is_pydantic_model(ann) or any(_holds_model(a) for a in typing.get_args(ann))


@cache
def _pydantic_fields(cls: Any) -> dict[str, tuple[str, Any]]:
    """JSON name (the alias, as the API spells it) -> (attribute, FieldInfo)."""
    return {(info.alias or name): (name, info) for name, info in cls.model_fields.items()}


_ADAPTERS: dict[str, Any] = {}


def _adapter(ann: Any) -> Any:
    from pydantic import TypeAdapter

    key = repr(ann)
    if key not in _ADAPTERS:
        _ADAPTERS[key] = TypeAdapter(ann)
    return _ADAPTERS[key]


def _pydantic_message(exc: Exception, value: Any, skip: int = 0) -> str:
    """pydantic's first complaint; skip drops the field name validate_assignment adds."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return f"{value!r}: {exc}"
    first = errors()[0]
    loc = "".join(f"[{p}]" for p in first.get("loc", ())[skip:])
    return f"{value!r}{' at ' + loc if loc else ''}: {first['msg']}"

"""Open-vocabulary detector backends (registry role `detector`): `TransformersDetector` (OWLv2 / OWL-ViT / Grounding
DINO through AutoModelForZeroShotObjectDetection) and `UltralyticsDetector` (YOLO-World / YOLOE with set_classes, or
a closed-vocabulary YOLO with a class map). ODE (Tu, Hu, Sang, CVPR 2025, §3.2) filters its images with YOLO-World
v2-L prompted with the pair's objects (github Iridescent-y/ODE). Boxes are recorded in pixel coordinates of the
original image; thresholds for filtering live in the filter stage (halluflow.ode.filtering).

On CUDA a batch of either never exceeds a memory budget (backend argument `memory_budget_mb`, default 90% of the
GPU memory free at the first batch): two probe forwards of 1 and 2 blank images measure the cost of an image and
`detection.batch_size` is cut to what fits (halluflow.devices.probe_batch_size); on the CPU it stands.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Sequence

from ..errors import BackendError, ConfigError, MissingExtraError
from ..models.standins import standin_info
from .base import BackendInfo, Detection, Detector
from .llm import apply_attention

# What a budget probe detects: images of a common photo size and a typical per-image vocabulary (the processors
# resize every image to the model's own input size, so the probe's size matters little).
PROBE_IMAGE_SIZE = (640, 480)
PROBE_LABELS = ("person", "dog", "cat", "car", "chair", "table", "cup", "tree")


def _keep_best(dets: list[Detection], max_detections: int) -> list[Detection]:
    # Stable order (score desc, then label and box) keeps the table byte-identical across runs.
    dets.sort(key=lambda d: (-d.score, d.label, d.box))
    return dets[:max_detections]


def _clip_box(box, width: int, height: int) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = (float(v) for v in box)
    w, h = float(width), float(height)
    return (min(max(x0, 0.0), w), min(max(y0, 0.0), h), min(max(x1, 0.0), w), min(max(y1, 0.0), h))


def check_budget(memory_budget_mb) -> float | None:
    if memory_budget_mb is None:
        return None
    if float(memory_budget_mb) < 0:
        raise ConfigError(
            f"detection.memory_budget_mb must be >= 0 (0 = the configured batch size), got {memory_budget_mb}"
        )
    return float(memory_budget_mb)


class BudgetBatching:
    """fit_batch_size for detectors: on CUDA the configured batch cut to what fits `memory_budget_mb` (probed once)."""

    device: str
    memory_budget_mb: float | None = None
    batching: dict = {}

    def fit_batch_size(self, configured: int) -> int:
        from PIL import Image

        from ..devices import probe_batch_size

        sizes = self.__dict__.setdefault("_batch_sizes", {})
        key = (self.device, configured)
        if key not in sizes:

            def probe(n: int):
                self.detect([Image.new("RGB", PROBE_IMAGE_SIZE)] * n, [list(PROBE_LABELS)] * n)

            sizes[key], self.batching = probe_batch_size(probe, self.device, configured, self.memory_budget_mb)
        return sizes[key]


class TransformersDetector(BudgetBatching, Detector):
    """Zero-shot detectors of transformers. OWL models score each query box against each label directly;
    Grounding DINO scores boxes against text tokens, so a label's score is the max over its own tokens (the
    phrase decoding of the stock post-processor can return merged or partial phrases that are not a label)."""

    OWL = ("owlv2", "owlvit")
    GROUNDING = ("grounding-dino", "mm-grounding-dino")

    def __init__(
        self,
        model: str,
        revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        box_threshold: float = 0.1,
        max_detections: int = 100,
        prompt_template: str = "{label}",
        memory_budget_mb: float | None = None,
        attn_implementation: str = "auto",
    ):
        from ..devices import resolve_device, resolve_dtype

        try:
            import torch  # noqa: F401
            from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor
        except ModuleNotFoundError as exc:
            raise MissingExtraError(
                f"detector 'transformers' needs the package {exc.name!r}: pip install 'halluflow[models]'"
            ) from exc
        if "{label}" not in prompt_template:
            raise ConfigError(f"detection.prompt_template {prompt_template!r} must contain '{{label}}'")
        self.model_id, self.revision = str(model), revision
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.box_threshold, self.max_detections = float(box_threshold), int(max_detections)
        self.prompt_template = prompt_template
        self.memory_budget_mb = check_budget(memory_budget_mb)
        self.standin = standin_info(self.model_id)
        try:
            self.processor = AutoProcessor.from_pretrained(self.model_id, revision=revision)
            self.model = (
                AutoModelForZeroShotObjectDetection.from_pretrained(self.model_id, revision=revision, dtype=self.dtype)
                .to(self.device)
                .eval()
            )
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"detection.model {self.model_id!r} (revision {revision!r}) could not be loaded: "
                f"{str(exc).splitlines()[0]}"
            ) from exc
        self.attn_implementation = apply_attention(self.model, attn_implementation, self.device)
        self.model_type = self.model.config.model_type
        if self.model_type not in self.OWL + self.GROUNDING:
            raise ConfigError(
                f"detection.model {self.model_id!r} is a {self.model_type!r} model; the transformers detector "
                f"supports {', '.join(self.OWL + self.GROUNDING)}"
            )

    def describe(self) -> BackendInfo:
        return BackendInfo(
            role="detector",
            backend="transformers",
            model=self.model_id,
            revision=self.revision,
            stand_in=self.standin is not None,
            extra={
                "model_type": self.model_type,
                "box_threshold": self.box_threshold,
                "device": self.device,
                "dtype": str(self.dtype).removeprefix("torch."),
                "attn_implementation": self.attn_implementation,
                **self.batching,
            },
        )

    def detect(self, images: Sequence, labels: Sequence[Sequence[str]]) -> list[list[Detection]]:
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} label lists")
        if not images:
            return []
        import torch

        with torch.inference_mode():
            if self.model_type in self.OWL:
                return self._detect_owl(images, labels)
            return self._detect_grounding(images, labels)

    def _texts(self, labels: Sequence[str]) -> list[str]:
        return [self.prompt_template.format(label=label) for label in labels]

    def _detect_owl(self, images, labels):
        import torch

        texts = [self._texts(ls) or [" "] for ls in labels]
        # OWL's text tower has 16 positions (the processor pads every query to them): a longer query is cut to fit,
        # as the model can read no more, instead of failing the whole batch on ragged token rows.
        inputs = self.processor(text=texts, images=list(images), return_tensors="pt", truncation=True).to(self.device)
        inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        outputs = self.model(**inputs)
        # The processor pads every image's label list to the longest one; padded queries must never win.
        for i, ls in enumerate(labels):
            outputs.logits[i, :, len(ls) :] = -torch.inf
        # OWLv2 pads images to a square before resizing, so boxes are relative to the padded square.
        sizes = [(max(im.height, im.width),) * 2 for im in images]
        results = self.processor.image_processor.post_process_object_detection(
            outputs, threshold=self.box_threshold, target_sizes=sizes
        )
        out = []
        for im, ls, res in zip(images, labels, results):
            dets = [
                Detection(ls[int(k)], float(s), _clip_box(b.tolist(), im.width, im.height))
                for s, k, b in zip(res["scores"], res["labels"], res["boxes"])
                if int(k) < len(ls)
            ]
            out.append(_keep_best(dets, self.max_detections))
        return out

    def _detect_grounding(self, images, labels):
        import torch

        # Grounding DINO expects lower-case phrases each ended by a period: "a cat. a remote control."
        texts, spans = [], []
        for ls in labels:
            text, sp = "", []
            for phrase in self._texts(ls):
                start = len(text)
                text += phrase.lower() + ". "
                sp.append((start, start + len(phrase)))
            texts.append(text.strip())
            spans.append(sp)
        inputs = self.processor(images=list(images), text=texts, return_tensors="pt", padding=True)
        offsets = self.processor.tokenizer(texts, return_offsets_mapping=True, padding=True)["offset_mapping"]
        inputs = inputs.to(self.device)
        inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        outputs = self.model(**inputs)
        probs = outputs.logits.float().sigmoid()  # (batch, queries, text tokens)
        boxes = outputs.pred_boxes.float()  # normalised (cx, cy, w, h) of the unpadded image
        out = []
        for i, (im, ls) in enumerate(zip(images, labels)):
            if not ls:
                out.append([])
                continue
            per_label = []
            for start, end in spans[i]:
                tokens = [t for t, (a, b) in enumerate(offsets[i]) if b > a and a >= start and b <= end]
                tokens = [t for t in tokens if t < probs.shape[-1]]
                per_label.append(probs[i][:, tokens].max(dim=-1).values if tokens else probs.new_zeros(probs.shape[1]))
            scores, best = torch.stack(per_label, dim=-1).max(dim=-1)
            cx, cy, w, h = boxes[i].unbind(-1)
            xyxy = torch.stack(
                [(cx - w / 2) * im.width, (cy - h / 2) * im.height, (cx + w / 2) * im.width, (cy + h / 2) * im.height],
                dim=-1,
            )
            keep = (scores >= self.box_threshold).nonzero().flatten().tolist()
            dets = [
                Detection(ls[int(best[q])], float(scores[q]), _clip_box(xyxy[q].tolist(), im.width, im.height))
                for q in keep
            ]
            out.append(_keep_best(dets, self.max_detections))
        return out


# ---- ultralytics ------------------------------------------------------------------------------------------------


def prepare_ultralytics_env(config_dir: str | os.PathLike = ".cache/ultralytics") -> Path:
    """Make ultralytics run with zero network calls: offline flags, and the font it would otherwise download.

    Must run before `import ultralytics` (it reads the settings at import time)."""
    config_dir = Path(config_dir).resolve()
    font = config_dir / "Ultralytics" / "Arial.ttf"
    if not font.exists():
        import matplotlib

        font.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf", font)
    os.environ.setdefault("YOLO_OFFLINE", "true")
    os.environ.setdefault("YOLO_AUTOINSTALL", "false")
    os.environ.setdefault("YOLO_CONFIG_DIR", str(config_dir))
    return config_dir


def _import_ultralytics():
    prepare_ultralytics_env(os.environ.get("YOLO_CONFIG_DIR", ".cache/ultralytics"))
    try:
        import ultralytics
    except ModuleNotFoundError as exc:
        raise MissingExtraError(
            f"detector 'ultralytics' needs the package {exc.name!r}: pip install 'halluflow[detect]'"
        ) from exc
    return ultralytics


def _weights_file(model: str) -> str:
    path = Path(model)
    if path.is_dir():
        found = sorted(path.glob("*.pt"))
        if not found:
            raise BackendError(f"detection.model {model!r}: folder holds no .pt weights file")
        return str(found[0])
    return model


class UltralyticsDetector(BudgetBatching, Detector):
    """YOLO-World / YOLOE prompted with the labels (set_classes), or a closed-vocabulary YOLO whose class names
    are matched to labels through `class_map` {label: class name} (labels equal to a class name map to it)."""

    def __init__(
        self,
        model: str,
        revision: str | None = None,
        device: str = "auto",
        box_threshold: float = 0.1,
        max_detections: int = 100,
        imgsz: int = 640,
        class_map: dict | None = None,
        open_vocabulary: str | bool = "auto",
        dtype: str = "auto",
        prompt_template: str = "{label}",
        memory_budget_mb: float | None = None,
    ):
        from ..devices import resolve_device

        ultralytics = _import_ultralytics()
        self.model_id, self.revision = str(model), revision
        self.device = resolve_device(device)
        self.box_threshold, self.max_detections, self.imgsz = float(box_threshold), int(max_detections), int(imgsz)
        self.class_map = dict(class_map or {})
        self.prompt_template = prompt_template
        self.memory_budget_mb = check_budget(memory_budget_mb)
        # ultralytics has one reduced precision (FP16 on a GPU); revision is recorded only (weights are files).
        self.half = dtype in ("auto", "float16", "bfloat16") and self.device.startswith("cuda")
        self.standin = standin_info(self.model_id)
        try:
            self.model = ultralytics.YOLO(_weights_file(self.model_id))
        except (OSError, FileNotFoundError, RuntimeError, ValueError) as exc:
            raise BackendError(f"detection.model {self.model_id!r} could not be loaded: {exc}") from exc
        can_prompt = hasattr(self.model.model, "set_classes")
        if open_vocabulary == "auto":
            open_vocabulary = can_prompt
        if open_vocabulary and not can_prompt:
            raise ConfigError(
                f"detection.open_vocabulary: {self.model_id!r} cannot be prompted with text "
                "(use a YOLO-World/YOLOE model, or open_vocabulary: false with detection.class_map)"
            )
        self.open_vocabulary = bool(open_vocabulary)
        self._classes: tuple[str, ...] | None = None
        if not self.open_vocabulary:
            known = set(self.model.names.values())
            bad = sorted(v for v in self.class_map.values() if v not in known)
            if bad:
                raise ConfigError(f"detection.class_map: {', '.join(bad)} not among the model's class names")

    def describe(self) -> BackendInfo:
        return BackendInfo(
            role="detector",
            backend="ultralytics",
            model=self.model_id,
            revision=self.revision,
            stand_in=self.standin is not None,
            extra={
                "open_vocabulary": self.open_vocabulary,
                "box_threshold": self.box_threshold,
                "device": self.device,
                "half": self.half,
                **self.batching,
            },
        )

    def _set_classes(self, classes: tuple[str, ...]) -> None:
        if classes == self._classes:
            return
        names = [self.prompt_template.format(label=c) for c in classes]
        try:
            if hasattr(self.model.model, "get_text_pe") and "yoloe" in type(self.model.model).__name__.lower():
                self.model.set_classes(names, self.model.model.get_text_pe(names))
            else:
                self.model.set_classes(names)
        except Exception as exc:  # noqa: BLE001 - the text encoder download is the usual failure offline
            raise BackendError(
                f"detection.model {self.model_id!r}: set_classes failed ({type(exc).__name__}: {exc}); "
                "YOLO-World/YOLOE need their CLIP text encoder, which ultralytics downloads on first use"
            ) from exc
        self._classes = classes

    def detect(self, images: Sequence, labels: Sequence[Sequence[str]]) -> list[list[Detection]]:
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} label lists")
        if not images:
            return []
        if self.open_vocabulary:
            # Class scores are independent sigmoids, so prompting with the batch's union and then keeping each
            # image's own labels gives the same boxes as one call per image, at one forward pass per batch.
            classes = tuple(sorted({label for ls in labels for label in ls}))
            if not classes:
                return [[] for _ in images]
            self._set_classes(classes)
            to_label = {i: c for i, c in enumerate(classes)}
        else:
            to_label = None
        results = self.model.predict(
            source=[im.convert("RGB") for im in images],
            conf=self.box_threshold,
            device=self.device,
            imgsz=self.imgsz,
            verbose=False,
            half=self.half,
            max_det=self.max_detections,
        )
        out = []
        for im, ls, res in zip(images, labels, results):
            if to_label is None:
                # Closed vocabulary: which model class stands for each label.
                wanted = {self.class_map.get(label, label): label for label in ls}
                names = {k: wanted.get(v) for k, v in res.names.items()}
            else:
                names = to_label
            dets = []
            for box, score, cls in zip(res.boxes.xyxy.tolist(), res.boxes.conf.tolist(), res.boxes.cls.tolist()):
                label = names.get(int(cls))
                if label is not None and label in ls:
                    dets.append(Detection(label, float(score), _clip_box(box, im.width, im.height)))
            out.append(_keep_best(dets, self.max_detections))
        return out

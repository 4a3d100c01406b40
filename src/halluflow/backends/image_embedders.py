"""Image embedders (the `image_embedder` role): CLIP, SigLIP, DINOv2 or any vision encoder through transformers.

Used by the release validity / contamination check (ODE's argument that synthetic images should be valid stand-ins
for real ones and must not copy them). `AutoModel` + `AutoImageProcessor`; models with a joint image-text space
(CLIP, SigLIP) give `get_image_features`, pure vision encoders (DINOv2) their pooled output. Offline, a tiny random
DINOv2 built from config stands in (`build_tiny_dinov2`); its embeddings only tell identical images apart.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import BackendError
from .base import Backend, BackendInfo


class ImageEmbedder(Backend):
    role = "image_embedder"

    @abstractmethod
    def embed_images(self, images: Sequence) -> np.ndarray:
        """Return an (n, d) float32 array of L2-normalised embeddings, one row per PIL image."""


class TransformersImageEmbedder(ImageEmbedder):
    def __init__(
        self, model: str, revision: str | None = None, device: str = "auto", dtype: str = "auto", batch_size: int = 16
    ):
        import torch
        from transformers import AutoImageProcessor, AutoModel

        from ..devices import resolve_device, resolve_dtype
        from ..models.standins import standin_info

        self.model_name = str(model)
        self.revision = revision
        self.device = resolve_device(device)
        self.batch_size = int(batch_size)
        self.stand_in = standin_info(model) is not None
        try:
            self.processor = AutoImageProcessor.from_pretrained(model, revision=revision)
            self.model = (
                AutoModel.from_pretrained(model, revision=revision, dtype=resolve_dtype(dtype, self.device))
                .to(self.device)
                .eval()
            )
        except OSError as exc:
            raise BackendError(f"image embedder {model!r}: cannot load ({exc})") from None
        self._torch = torch

    def embed_images(self, images: Sequence) -> np.ndarray:
        """(n, d) L2-normalised float32 embeddings of PIL images."""
        torch = self._torch
        rows = []
        for start in range(0, len(images), self.batch_size):
            batch = self.processor(images=list(images[start : start + self.batch_size]), return_tensors="pt")
            batch = {k: v.to(self.device) for k, v in batch.items()}
            with torch.inference_mode():
                if hasattr(self.model, "get_image_features"):  # joint image-text models (CLIP, SigLIP)
                    feats = self.model.get_image_features(**batch)
                    feats = getattr(feats, "pooler_output", feats)
                else:
                    out = self.model(**batch)
                    pooled = getattr(out, "pooler_output", None)
                    feats = pooled if pooled is not None else out.last_hidden_state[:, 0]
            rows.append(feats.float().cpu().numpy())
        emb = np.concatenate(rows) if rows else np.zeros((0, 1), dtype=np.float32)
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        return (emb / np.where(norms == 0, 1, norms)).astype(np.float32)

    def describe(self) -> BackendInfo:
        return BackendInfo(
            role="image_embedder",
            backend="transformers",
            model=self.model_name,
            revision=self.revision,
            stand_in=self.stand_in,
        )


def build_tiny_dinov2(
    out_dir: Path, seed: int = 0, image_size: int = 32, patch_size: int = 8, hidden_size: int = 32
) -> dict:
    """A randomly initialised DINOv2 (real `Dinov2Model` + `BitImageProcessor`), saved for `from_pretrained`."""
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    config = Dinov2Config(
        image_size=image_size,
        patch_size=patch_size,
        hidden_size=hidden_size,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
    )
    Dinov2Model(config).save_pretrained(out_dir)
    BitImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}, do_center_crop=True
    ).save_pretrained(out_dir)
    return {"image_size": image_size, "hidden_size": hidden_size}

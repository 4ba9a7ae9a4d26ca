"""A variant: one way of running the user's training step (the baseline: no change)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

Source = Literal["cached", "loader", "device"]


@dataclass(frozen=True)
class Variant:
    """What differs from the user's own setup. Every field's default means "as the user has it".

    ``source`` says where batches come from: ``cached`` (a fixed set of batches taken from the
    loader once, so that compute experiments do not measure the loader), ``loader`` (a clone of
    the user's DataLoader with ``loader`` overrides: loader experiments measure the loader
    itself) or ``device`` (the cached batches kept on the GPU: no loading, no copies).
    """

    label: str
    source: Source = "cached"
    loader: dict[str, Any] = field(default_factory=dict)
    batch_factor: int = 1
    non_blocking: bool = False
    autocast: Literal["bfloat16", "float16"] | None = None
    channels_last: bool = False
    tf32: bool = False
    cudnn_benchmark: bool = False
    compile: bool = False

    def with_(self, **changes: Any) -> Variant:
        return dataclasses.replace(self, **changes)

    def combine(self, other: Variant, label: str) -> Variant:
        """This variant with ``other``'s changes added (other wins where both set something)."""
        source: Source = self.source
        if other.source == "device" or self.source == "device":
            source = "device"
        elif other.source == "loader" or self.source == "loader":
            source = "loader"
        return Variant(
            label=label,
            source=source,
            loader={**self.loader, **other.loader},
            batch_factor=max(self.batch_factor, other.batch_factor),
            non_blocking=self.non_blocking or other.non_blocking,
            autocast=other.autocast or self.autocast,
            channels_last=self.channels_last or other.channels_last,
            tf32=self.tf32 or other.tf32,
            cudnn_benchmark=self.cudnn_benchmark or other.cudnn_benchmark,
            compile=self.compile or other.compile,
        )

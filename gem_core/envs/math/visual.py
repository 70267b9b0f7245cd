"""Math problems that come with figures (``math:Geometry3K``): the math env plus the row's images.

The images travel beside the first observation, in ``info["images"]`` of :meth:`MathVisualEnv.reset` (a
list of RGB PIL images shown before the question text, as in the vision envs; see
:mod:`gem_core.rollout.vision`). Grading is the math env's. Needs Pillow (``pip install -e ".[vision]"``).

An image cell may be a PIL image (hub datasets with an ``Image`` feature), a ``{"bytes": ..., "path": ...}``
record (parquet exports), or a file name. A file name is data, not a pointer anywhere on the machine: it
is read only from the folder of the local data file that holds the row, never from elsewhere.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from gem_core.envs.dataset import DataFiles
from gem_core.envs.math.env import MathEnv
from gem_core.errors import DependencyNotInstalled, InvalidArgument
from gem_core.registry import forwards_kwargs

__all__ = ["MathVisualEnv", "load_images"]

#: Most figures one question may carry (a row is data: it does not choose how many images are decoded).
MAX_IMAGES = 8
#: Largest figure accepted, in pixels (width * height); larger ones are refused before they are decoded.
MAX_PIXELS = 16_000_000


def _image_module() -> Any:
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow ships with the vision extra
        raise DependencyNotInstalled('math:Geometry3K needs Pillow for its figures: pip install -e ".[vision]"') from exc
    return Image


def _open(Image: Any, source: Any) -> Any:
    image = Image.open(source)
    if image.width * image.height > MAX_PIXELS:
        raise InvalidArgument(f"Figure of {image.width}x{image.height} pixels is over the {MAX_PIXELS}-pixel limit.")
    return image.convert("RGB")


def load_images(cell: Any, folder: Path | None) -> list[Any]:
    """The figures of one dataset cell as RGB PIL images.

    Args:
        cell: one image or a list of them (PIL images, ``{"bytes", "path"}`` records or file names).
        folder: where file names are read from (the local data file's folder); None refuses file names.

    Raises:
        ValueError: a file name outside ``folder`` (or with no local data file), too many or too large
            images, or a cell of another kind.
    """
    Image = _image_module()
    items = cell if isinstance(cell, (list, tuple)) else [cell]
    if len(items) > MAX_IMAGES:
        raise InvalidArgument(f"A row has {len(items)} images; at most {MAX_IMAGES} are read.")
    images = []
    for item in items:
        if isinstance(item, Image.Image):
            images.append(item.convert("RGB"))
        elif isinstance(item, dict) and item.get("bytes"):
            images.append(_open(Image, io.BytesIO(item["bytes"])))
        elif isinstance(item, (str, dict)):
            name = item if isinstance(item, str) else item.get("path")
            if not name or folder is None:
                raise InvalidArgument(f"Image {name!r} is a file name, but the rows come from the hub, not a local file.")
            path = (folder / name).resolve()
            if folder not in path.parents:
                raise InvalidArgument(f"Image {name!r} is outside {folder}; a row may only name files beside its data file.")
            images.append(_open(Image, path))
        else:
            raise InvalidArgument(f"Cannot read an image from a {type(item).__name__} cell.")
    return images


@forwards_kwargs(MathEnv)
class MathVisualEnv(MathEnv):
    """A :class:`MathEnv` whose rows carry figures in ``image_field``; see the module docstring.

    Args:
        dataset_path: a hub dataset id or local path (as :class:`MathEnv`).
        image_field: the column holding the row's image(s).
        data_files: local data files (as :class:`MathEnv`); images named by relative path are found beside a
            single file.
        **kwargs: as :class:`MathEnv`.

    Raises:
        InvalidArgument: if the dataset has no ``image_field`` column.
    """

    def __init__(
        self, dataset_path: str | None = None, *, image_field: str = "images", data_files: DataFiles | None = None, **kwargs: Any
    ):
        super().__init__(dataset_path, data_files=data_files, **kwargs)
        if image_field not in self.rows.column_names:
            raise InvalidArgument(
                f"Dataset {dataset_path or data_files!r} has no column {image_field!r}; its columns are "
                f"{self.rows.column_names}. Pass image_field= naming the one that holds the figures."
            )
        self.image_field = image_field
        self.image_folder = Path(data_files).resolve().parent if isinstance(data_files, (str, os.PathLike)) else None  # a single file

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Draw a question and its figures; ``options={"index": i}`` picks row ``i`` instead."""
        observation, info = super().reset(seed=seed, options=options)
        images = load_images(self.rows[self.index][self.image_field], self.image_folder)
        return observation, {**info, "images": images}

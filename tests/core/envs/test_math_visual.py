"""math:Geometry3K (gem_core.envs.math.visual): figures travel in info["images"]; a row's file names are
read only from beside its data file; too many or too large figures are refused."""

from __future__ import annotations

import json

import pytest

PIL = pytest.importorskip("PIL")
pytest.importorskip("datasets")

from PIL import Image  # noqa: E402

from gem_core import make, spec  # noqa: E402
from gem_core.envs.math import visual  # noqa: E402


def write_rows(folder, rows):
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_sample_figures_come_with_the_question_and_the_answer_is_graded():
    env = make("math:Geometry3K", **spec("math:Geometry3K").sample_kwargs)
    observation, info = env.reset(seed=0)
    assert observation and len(info["images"]) == 1
    assert isinstance(info["images"][0], Image.Image) and info["images"][0].mode == "RGB"
    _, reward, terminated, _, _ = env.step("\\boxed{" + env.gold + "}")
    assert reward == 1.0 and terminated


@pytest.mark.parametrize("name", ["../outside.png", "/etc/passwd", "sub/../../outside.png"])
def test_a_row_cannot_name_a_file_outside_its_folder(tmp_path, name):
    data = tmp_path / "data"
    data.mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "outside.png")
    env = make("math:Geometry3K", data_files=write_rows(data, [{"problem": "p", "answer": "1", "images": [name]}]))
    with pytest.raises(ValueError, match="outside"):
        env.reset(seed=0)


def test_a_symlink_out_of_the_folder_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "outside.png")
    (data / "link.png").symlink_to(tmp_path / "outside.png")
    env = make("math:Geometry3K", data_files=write_rows(data, [{"problem": "p", "answer": "1", "images": ["link.png"]}]))
    with pytest.raises(ValueError, match="outside"):
        env.reset(seed=0)


def test_too_many_or_too_large_figures_are_refused(tmp_path):
    Image.new("RGB", (4, 4)).save(tmp_path / "small.png")
    with pytest.raises(ValueError, match="at most"):
        visual.load_images(["small.png"] * (visual.MAX_IMAGES + 1), tmp_path)
    Image.new("1", (5000, 4000)).save(tmp_path / "huge.png")
    with pytest.raises(ValueError, match="pixel limit"):
        visual.load_images(["huge.png"], tmp_path)


def test_hub_cells_images_and_bytes_records_are_read_and_file_names_need_a_local_file(tmp_path):
    import io

    image = Image.new("RGB", (3, 3), "red")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    images = visual.load_images([image, {"bytes": buffer.getvalue(), "path": None}], None)
    assert [im.size for im in images] == [(3, 3), (3, 3)]
    with pytest.raises(ValueError, match="from the hub"):
        visual.load_images(["figure.png"], None)


def test_a_missing_image_column_is_named(tmp_path):
    path = write_rows(tmp_path, [{"problem": "p", "answer": "1"}])
    with pytest.raises(ValueError, match="image_field="):
        make("math:Geometry3K", data_files=path)

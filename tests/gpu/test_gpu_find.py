"""Find on CUDA tensors (CUDA events on the handle's stream), algo="find" against the float64
CPU reference, and the find-db keyed by the GPU. Runs only on a machine with a GPU."""
import pytest

convcore = pytest.importorskip("convcore", reason="convcore is not built/installed")
torch = pytest.importorskip("torch", reason="PyTorch is not installed")


def _convcore_cuda_devices():
    count = getattr(convcore, "cuda_device_count", None)
    return count() if callable(count) else 0


pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU"),
    pytest.mark.skipif(_convcore_cuda_devices() == 0,
                       reason="convcore reports no CUDA device (built without CUDA or no GPU)"),
]


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = tmp_path / "find-db.txt"
    monkeypatch.setenv("CONVCORE_FIND_DB", str(path))
    monkeypatch.delenv("CONVCORE_DISABLE_ALGOS", raising=False)
    convcore.clear_find_cache()
    yield path
    convcore.clear_find_cache()


def test_find_on_cuda_tensors(db):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 16, 20, 20, generator=gen, dtype=torch.float32)
    w = torch.randn(24, 16, 3, 3, generator=gen, dtype=torch.float32)
    conv = convcore.Convolution(padding=1)
    results = conv.find(x.cuda(), w.cuda())
    ran = [r for r in results if r.status == "success"]
    assert ran and results[:len(ran)] == ran
    assert [r.time_ms for r in ran] == sorted(r.time_ms for r in ran)
    assert sorted(r.name for r in ran) == sorted(
        conv.applicable_algos(x.shape, w.shape, device="cuda"))
    text = db.read_text()
    assert "\tcuda:" in text and "\tfwd\t" in text

    before = convcore.find_stats()
    y = conv.forward(x.cuda(), w.cuda(), algo="find")
    assert convcore.find_stats()["timed_runs"] == before["timed_runs"]
    ref = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    err = float((y.cpu().double() - ref).norm() / ref.norm())
    assert err < 1e-3, (ran[0].name, err)  # the loosest forward bound (Winograd 4x4) is 5e-4


def test_workspace_limit_on_cuda(db):
    x = torch.randn(1, 8, 16, 16, device="cuda")
    w = torch.randn(8, 8, 3, 3, device="cuda")
    results = convcore.Convolution(padding=1).find(x, w, workspace_limit=0)
    assert all(r.workspace == 0 for r in results if r.status == "success")

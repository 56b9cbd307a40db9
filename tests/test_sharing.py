"""Dominant-resource fairness between activities whose work is measured in different units."""

from __future__ import annotations

import pytest

from acesim.engine import Engine


def test_kernel_and_dma_bound_by_hbm_get_equal_byte_shares() -> None:
    # A kernel (work 1.0, 4e9 HBM bytes per unit) and a DMA stream (work in bytes, 1 HBM byte
    # per byte) both bound by one 1e9 B/s HBM: each gets 0.5e9 B/s of HBM.
    engine = Engine()
    hbm = engine.add_resource("hbm", 1e9)
    kernel = engine.start(1.0, {hbm: 4e9}, tag="kernel")
    dma = engine.start(1e9, {hbm: 1.0}, tag="dma")
    engine.run(until=0.0)
    engine.settle()
    assert kernel.rate * 4e9 == pytest.approx(0.5e9)
    assert dma.rate == pytest.approx(0.5e9)


def test_weight_scales_the_dominant_share() -> None:
    engine = Engine()
    hbm = engine.add_resource("hbm", 3e9)
    a = engine.start(1.0, {hbm: 1e9}, weight=2.0, tag="a")
    b = engine.start(1e12, {hbm: 1.0}, weight=1.0, tag="b")
    engine.settle()
    assert a.rate * 1e9 == pytest.approx(2e9)
    assert b.rate == pytest.approx(1e9)


def test_dominant_resource_decides_the_share() -> None:
    # x's dominant resource is the link (1e-9 of it per byte vs 5e-10 of HBM), y's is HBM.
    # DRF equalises dominant shares until HBM saturates: 5 x + y = 10e9 with x/1e9 = y/10e9
    # gives x = 2/3 GB/s (2/3 of the link) and y = 6.67 GB/s (2/3 of HBM).
    engine = Engine()
    link = engine.add_resource("link", 1e9)
    hbm = engine.add_resource("hbm", 10e9)
    x = engine.start(1e12, {link: 1.0, hbm: 5.0}, tag="x")
    y = engine.start(1e12, {hbm: 1.0}, tag="y")
    engine.settle()
    assert x.rate == pytest.approx(2e9 / 3)
    assert y.rate == pytest.approx(20e9 / 3)
    assert x.rate * 5 + y.rate == pytest.approx(hbm.capacity)

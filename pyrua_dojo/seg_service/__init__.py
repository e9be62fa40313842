"""The segmentation service: one HTTP server over pluggable backends (SAM 3 on a GPU, or the twin's masks).

The client is `primitives.seg_client.SegmentationClient`; the contract is `shared/reference/sam3.md`
section 6. Importing this package never imports torch or sam3 (`Sam3Backend.load` does, on demand).
"""

from pyrua_dojo.seg_service.backend import BackendInfo, Detection, SegmentationBackend, SegmentationRequestError
from pyrua_dojo.seg_service.sam3_backend import Sam3Backend, Sam3Unavailable
from pyrua_dojo.seg_service.serve import serve_sam3, serve_twin
from pyrua_dojo.seg_service.http_server import SegmentationServer, ServerLimits
from pyrua_dojo.seg_service.twin_backend import DictMaskOracle, MaskOracle, ObjectMask, TwinBackend, TwinNoise

__all__ = [
    "BackendInfo",
    "Detection",
    "DictMaskOracle",
    "MaskOracle",
    "ObjectMask",
    "Sam3Backend",
    "Sam3Unavailable",
    "SegmentationBackend",
    "SegmentationRequestError",
    "SegmentationServer",
    "ServerLimits",
    "TwinBackend",
    "TwinNoise",
    "serve_sam3",
    "serve_twin",
]

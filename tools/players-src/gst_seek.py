"""GStreamer playbin seeking for tools/players: pause, seek (flush, accurate) to SECONDS, play to the end and
print each decoded I420 frame's checksum the way checksumsink does, so the suite compares frames as for a full play.

    /usr/bin/python3 gst_seek.py URI SECONDS
"""

import sys

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

Gst.init(None)
uri, seconds = sys.argv[1], float(sys.argv[2])
pipeline = Gst.parse_launch(
    f"playbin uri={uri} "
    "video-sink=\"videoconvert ! video/x-raw,format=I420 ! checksumsink sync=false\" "
    "audio-sink=\"fakesink sync=false\"")
bus = pipeline.get_bus()


def wait(types):
    message = bus.timed_pop_filtered(30 * Gst.SECOND, types | Gst.MessageType.ERROR)
    if message is None:
        sys.stderr.write("ERROR: timed out\n")
        sys.exit(1)
    if message.type == Gst.MessageType.ERROR:
        error, debug = message.parse_error()
        sys.stderr.write(f"ERROR: {error.message} ({debug})\n")
        sys.exit(1)
    return message


pipeline.set_state(Gst.State.PAUSED)
wait(Gst.MessageType.ASYNC_DONE)
if not pipeline.seek_simple(Gst.Format.TIME, Gst.SeekFlags.FLUSH | Gst.SeekFlags.ACCURATE,
                            int(seconds * Gst.SECOND)):
    sys.stderr.write("ERROR: seek refused\n")
    sys.exit(1)
wait(Gst.MessageType.ASYNC_DONE)
pipeline.set_state(Gst.State.PLAYING)
wait(Gst.MessageType.EOS)
pipeline.set_state(Gst.State.NULL)

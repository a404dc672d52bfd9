/** Media helpers over ffmpeg (see ./ffmpeg.ts for how the binary is found and run). */
export { defaultFfmpeg, locateFfmpeg, runFfmpeg, streamFfmpeg, DEFAULT_TIMEOUT_MS } from './ffmpeg.js';
export { ProcessSlots } from './process-slots.js';
export type { FfmpegCallOptions, FfmpegLocation, FfmpegResult, FfmpegSource, LocateFfmpegOptions, RunFfmpegOptions, StreamFfmpegOptions } from './ffmpeg.js';
export { FfmpegNotFoundError, MediaDecodeError, MediaTimeoutError, stderrTail } from './errors.js';
export { channelCount, parseProbeOutput, parseProgressTime, probeMedia } from './probe.js';
export type { AudioStreamInfo, MediaProbe, ProbeOptions, StreamInfo, VideoStreamInfo } from './probe.js';
export { decodeAudio, float32FromBytes, formatSeconds, streamAudio } from './audio.js';
export type { AudioDecodeOptions, DecodeAudioOptions, StreamAudioOptions } from './audio.js';
export { extractFrame } from './frames.js';
export type { ExtractFrameOptions, FrameFormat } from './frames.js';
export { detectSceneChanges, SceneLogParser } from './scenes.js';
export type { DetectScenesOptions, SceneChange } from './scenes.js';
export { copyBlobToTempFile, extensionFor } from './blob-file.js';
export type { CopyBlobOptions, TempMediaFile } from './blob-file.js';
export { isBlobReference, openMediaInput } from './media-input.js';
export type { MediaInputOptions } from './media-input.js';

/**
 * image_extractor: one document per image with its size and format, dominant colours and perceptual hash
 * (from the image-descriptor model), a JPEG thumbnail saved as an artifact, the text OCR reads in it
 * (paddle-ocr), and a 256-d `image_embedding` (image-descriptor).
 *
 * The draft key is always `image`, so re-running the same object replaces its document (and its
 * thumbnail, saved under the same artifact name). An image sharp cannot decode is an InputError.
 *
 * When OCR finds text, it is also embedded (`ocr_text_embedding`, hashed-ngram-text, 384-d): an optional
 * feature, present only on images that have text — never a made-up vector for those that do not.
 */
import { defineExtractor, type DocumentDraft, type ExtractorContext } from '../../../kernel/plugins.js';
import { makeThumbnail, ownThumbnail, readHeader, workingCopy } from './image.js';
import { readImageInput } from './input.js';
import { parametersSchema, resolveParameters } from './parameters.js';

export const IMAGE_EMBEDDING_DIMS = 256;
export const IMAGE_MODEL = 'image-descriptor';
export const OCR_MODEL = 'paddle-ocr';
export const OCR_TEXT_MODEL = 'hashed-ngram-text';
export const OCR_TEXT_DIMS = 384;
export const THUMBNAIL_NAME = 'thumbnail.jpg';

const COLOUR = /^#[0-9a-f]{6}$/i;
const PHASH = /^[0-9a-f]{16}$/i;

interface Description {
  vector: number[];
  dominantColours: string[];
  perceptualHash: string | undefined;
}

async function describeImage(ctx: ExtractorContext, image: Buffer): Promise<Description> {
  const [result] = await ctx.inference.embedImage(IMAGE_MODEL, [image]);
  if (!result) throw new Error(`image_extractor: model ${IMAGE_MODEL} returned no embedding`);
  if (result.vector.length !== IMAGE_EMBEDDING_DIMS) {
    throw new Error(`image_extractor: model ${IMAGE_MODEL} gives ${result.vector.length}-d vectors; image_embedding needs ${IMAGE_EMBEDDING_DIMS}`);
  }
  const colours = result.extras.dominant_colors;
  const phash = result.extras.phash;
  // Extras are the model's own JSON: keep only what matches the declared field formats.
  return {
    vector: result.vector,
    dominantColours: (Array.isArray(colours) ? colours : [])
      .filter((c): c is string => typeof c === 'string' && COLOUR.test(c))
      .map((c) => c.toLowerCase())
      .slice(0, 5),
    perceptualHash: typeof phash === 'string' && PHASH.test(phash) ? phash.toLowerCase() : undefined,
  };
}

async function readText(ctx: ExtractorContext, image: Buffer): Promise<string> {
  const [result] = await ctx.inference.ocr(OCR_MODEL, [image]);
  return (result?.text ?? '').trim();
}

const blobReferenceSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['storage_key', 'content_type', 'size_bytes'],
  properties: {
    storage_key: { type: 'string', minLength: 1 },
    content_type: { type: 'string', minLength: 1 },
    size_bytes: { type: 'integer', minimum: 0 },
  },
};

export default defineExtractor({
  name: 'image_extractor',
  version: '1.0',
  description:
    'One document per image: width, height, format, dominant colours, perceptual hash, a JPEG thumbnail, the text read ' +
    'by OCR, and a 256-d image embedding (image-descriptor: colour, layout and texture).',
  accepts: ['image/*'],
  inputs: [
    {
      name: 'image',
      type: 'image',
      required: true,
      description: 'The image: a blob reference, or base64 data (a data: URL is fine). Any format sharp decodes.',
    },
  ],
  parameters: parametersSchema,
  features: [
    { name: 'image_embedding', dims: IMAGE_EMBEDDING_DIMS, distance: 'cosine', model: IMAGE_MODEL },
    { name: 'ocr_text_embedding', dims: OCR_TEXT_DIMS, distance: 'cosine', model: OCR_TEXT_MODEL, optional: true },
  ],
  fields: {
    type: 'object',
    additionalProperties: false,
    required: ['width', 'height', 'format', 'size_bytes', 'dominant_colours', 'thumbnail'],
    properties: {
      width: { type: 'integer', minimum: 1, description: 'Width in pixels, after EXIF orientation.' },
      height: { type: 'integer', minimum: 1, description: 'Height in pixels, after EXIF orientation.' },
      format: { type: 'string', minLength: 1, description: 'Encoding: jpeg, png, webp, gif, tiff, avif, heif, svg, ...' },
      size_bytes: { type: 'integer', minimum: 1, description: 'Size of the encoded image.' },
      dominant_colours: {
        type: 'array',
        maxItems: 5,
        items: { type: 'string', pattern: '^#[0-9a-f]{6}$' },
        description: "Up to five '#rrggbb' colours, most frequent first.",
      },
      perceptual_hash: {
        type: 'string',
        pattern: '^[0-9a-f]{16}$',
        description: '64-bit DCT perceptual hash (16 hex digits): near-identical images differ in few bits.',
      },
      thumbnail: { ...blobReferenceSchema, description: 'The JPEG thumbnail (longest side thumbnail_size).' },
      ocr_text: {
        type: 'string',
        description: "Text read in the image, one line per line ('' when there is none); absent when enable_ocr is false.",
      },
    },
  },
  async *extract(ctx, input): AsyncIterable<DocumentDraft> {
    const params = resolveParameters(input.parameters);
    const bytes = await readImageInput(ctx.blobs, input.fields.image);
    const header = await readHeader(bytes);
    // The thumbnail decodes every pixel: a truncated or corrupt image fails here, before any model call. A
    // small JPEG that is its own thumbnail is decoded by the image model instead, which rejects it the same way.
    const thumbnail = ownThumbnail(bytes, header, params.thumbnailSize) ?? (await makeThumbnail(bytes, params.thumbnailSize));
    const working = await workingCopy(bytes, header);
    const [description, ocrText, thumbnailRef] = await Promise.all([
      describeImage(ctx, working),
      params.enableOcr ? readText(ctx, working) : Promise.resolve(undefined),
      ctx.artifacts.save(THUMBNAIL_NAME, thumbnail.jpeg, 'image/jpeg'),
    ]);
    const fields: Record<string, unknown> = {
      width: header.width,
      height: header.height,
      format: header.format,
      size_bytes: bytes.length,
      dominant_colours: description.dominantColours,
      thumbnail: thumbnailRef,
    };
    if (description.perceptualHash) fields.perceptual_hash = description.perceptualHash;
    const features: Record<string, number[]> = { image_embedding: description.vector };
    if (ocrText !== undefined) fields.ocr_text = ocrText;
    if (ocrText && ocrText.trim().length > 0) {
      const [vector] = await ctx.inference.embedText(OCR_TEXT_MODEL, [ocrText]);
      if (vector?.length !== OCR_TEXT_DIMS) throw new Error(`${OCR_TEXT_MODEL} returned a vector of ${vector?.length ?? 0} dimensions, expected ${OCR_TEXT_DIMS}`);
      features.ocr_text_embedding = vector;
    }
    yield { key: 'image', fields, features };
  },
});

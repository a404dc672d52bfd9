/** Every built-in plugin, named once. The `tessera` entry point loads this list, then TESSERA_PLUGINS. */
import analytics from './resources/analytics/index.js';
import apiKeys from './resources/api-keys/index.js';
import auditLog from './resources/audit-log/index.js';
import batches from './resources/batches/index.js';
import buckets from './resources/buckets/index.js';
import collections from './resources/collections/index.js';
import audioExtractor from './extractors/audio_extractor/index.js';
import imageExtractor from './extractors/image_extractor/index.js';
import passthroughExtractor from './extractors/passthrough_extractor/index.js';
import pdfExtractor from './extractors/pdf_extractor/index.js';
import textExtractor from './extractors/text_extractor/index.js';
import videoExtractor from './extractors/video_extractor/index.js';
import hashedNgramText from './models/hashed-ngram-text/index.js';
import imageDescriptor from './models/image-descriptor/index.js';
import lexicalReranker from './models/lexical-reranker/index.js';
import logMelAudio from './models/log-mel-audio/index.js';
import onnxModels from './models/onnx/index.js';
import paddleOcr from './models/paddle-ocr/index.js';
import health from './resources/health/index.js';
import namespaces from './resources/namespaces/index.js';
import namespaceTemplates from './resources/namespace-templates/index.js';
import storage from './resources/storage/index.js';
import usage from './resources/usage/index.js';
import users from './resources/users/index.js';
import retrievers from './resources/retrievers/index.js';
import publishedRetrievers from './resources/published-retrievers/index.js';
import marketplace from './resources/marketplace/index.js';
import searchPage from './resources/search-page/index.js';
import webhooks from './resources/webhooks/index.js';
import secrets from './resources/secrets/index.js';
import manifests from './resources/manifests/index.js';
import aggregate from './stages/aggregate/index.js';
import attributeFilter from './stages/attribute_filter/index.js';
import deduplicate from './stages/deduplicate/index.js';
import documentEnrich from './stages/document_enrich/index.js';
import featureSearch from './stages/feature_search/index.js';
import groupBy from './stages/group_by/index.js';
import jsonTransform from './stages/json_transform/index.js';
import limitStage from './stages/limit/index.js';
import mmr from './stages/mmr/index.js';
import ragPrepare from './stages/rag_prepare/index.js';
import sample from './stages/sample/index.js';
import scoreNormalize from './stages/score_normalize/index.js';
import sortAttribute from './stages/sort_attribute/index.js';
import sortRelevance from './stages/sort_relevance/index.js';
import rerank from './stages/rerank/index.js';
import textSearch from './stages/text_search/index.js';
import unwind from './stages/unwind/index.js';

export default [
  health,
  users,
  apiKeys,
  auditLog,
  usage,
  namespaces,
  buckets,
  storage,
  collections,
  batches,
  retrievers,
  namespaceTemplates,
  publishedRetrievers,
  marketplace,
  searchPage,
  webhooks,
  secrets,
  manifests,
  analytics,
  attributeFilter,
  featureSearch,
  sortAttribute,
  limitStage,
  textSearch,
  sortRelevance,
  scoreNormalize,
  sample,
  deduplicate,
  groupBy,
  unwind,
  mmr,
  aggregate,
  documentEnrich,
  rerank,
  jsonTransform,
  ragPrepare,
  passthroughExtractor,
  textExtractor,
  audioExtractor,
  videoExtractor,
  imageExtractor,
  pdfExtractor,
  hashedNgramText,
  imageDescriptor,
  logMelAudio,
  paddleOcr,
  lexicalReranker,
  // One model per folder of TESSERA_MODEL_DIR (none when it is unset).
  ...onnxModels,
];

/** The page renderer without HTTP: component switches, every input type, defaults, and clamped values. */
import { describe, expect, it } from 'vitest';
import { pageAssets } from '../../../../plugins/resources/search-page/assets.js';
import { renderSearchPage } from '../../../../plugins/resources/search-page/render.js';
import { pageViewOf } from '../../../../plugins/resources/search-page/view.js';
import { record } from './fixtures.js';

describe('renderSearchPage', () => {
  it('renders every input type in order, with labels, placeholders and options', async () => {
    const view = pageViewOf(record('inputs', {
      inputs: [
        { field_name: 'notes', input_type: 'textarea', label: 'Notes', placeholder: 'Say more', order: 5 },
        { field_name: 'max_price', input_type: 'number', label: 'Max price', field_schema: { type: 'integer' }, order: 2 },
        { field_name: 'in_stock', input_type: 'checkbox', label: 'In stock only', order: 3 },
        { field_name: 'room', label: 'Room', field_schema: { options: [{ value: 'k', label: 'Kitchen' }, 'bath'] }, input_type: 'select', order: 4 },
        { field_name: 'q', label: 'Words', order: 1 },
      ],
    }));
    const html = renderSearchPage(view, await pageAssets());
    const ids = [...html.matchAll(/id="input-([a-z_]+)"/g)].map((m) => m[1]);
    expect(ids).toEqual(['q', 'max_price', 'in_stock', 'room', 'notes']);
    expect(html).toContain('<label for="input-notes">Notes</label><textarea id="input-notes" name="notes" data-input="notes" data-value-type="string" placeholder="Say more" rows="3"></textarea>');
    expect(html).toMatch(/<input type="number" id="input-max_price"[^>]*data-value-type="integer"[^>]*step="1">/);
    expect(html).toMatch(/<input type="checkbox" id="input-in_stock"[^>]*data-value-type="boolean">/);
    expect(html).toContain('<option value="k">Kitchen</option><option value="bath">bath</option>');
  });

  it('gives a publication without inputs one search box, and honours the component switches', async () => {
    const view = pageViewOf(record('plain', { components: { show_hero: false, show_search: false, show_results_header: false } }));
    expect(view.client.inputs).toEqual([{ name: 'query', type: 'text', valueType: 'string', label: 'Search', placeholder: '', required: false, options: [] }]);
    const html = renderSearchPage(view, await pageAssets());
    expect(html).toContain('<header class="hero visually-hidden">');
    expect(html).toMatch(/<form id="search-form" class="search" [^>]*data-auto-search="true" hidden>/);
    expect(html).toContain('<h2 id="results-heading" class="visually-hidden">Results</h2>');
    // Defaults: grid of 3, elevated cards, title from the publication.
    expect(html).toMatch(/<body class="template-default layout-grid cards-elevated card-vertical">/);
    expect(html).toContain('<h1>plain</h1>');
  });
});
